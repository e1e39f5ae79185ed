import { describeValue, FloodgateError } from "../errors.ts";
import { createRateLimiter, type Charge, type Decision, type RateLimiter } from "../limiter.ts";
import { memoryStore } from "../stores/memory-store.ts";
import type { RateLimitStore } from "../stores/store.ts";
import type { HookCaller } from "./hooks.ts";
import type { HttpRateLimitOptions, RateLimitRequest } from "./options.ts";

// The store-failure policy: a deadline on every store call, a circuit breaker per store, and what
// a failure becomes (the local fallback limiter, an allow or a deny, as `onStoreError` says).

/** What to do when the store fails, times out, or its circuit is open. */
export type StoreErrorAction = "allow" | "deny" | "fallback";

/** Options of the circuit breaker that stops calling a failing store. */
export interface CircuitBreakerOptions {
  /** Consecutive failures (errors or timeouts) that open the circuit (default 5). */
  failures?: number;
  /** How long the circuit stays open, in ms (default 30,000); then one call probes the store. */
  cooldownMs?: number;
}

/** Where a request's decision came from: the store, the local fallback limiter, or the store-error policy. */
export type DecisionSource = "store" | "fallback" | "allow" | "deny";

/** Counts consecutive store failures; while open, the store is not called at all. */
export class CircuitBreaker {
  #failures = 0;
  #openUntil = 0;

  constructor(readonly threshold: number, readonly cooldownMs: number) {}

  /** Ms left open at `nowMs`, or 0 when the store may be called. */
  openFor(nowMs: number): number {
    return this.#openUntil > nowMs ? this.#openUntil - nowMs : 0;
  }

  /**
   * Before a store call: ms left open (do not call), or 0 (call). After the cool-down, the first
   * call is the one probe: the circuit stays open to the others until it settles (or, should it
   * never settle, for another cool-down).
   */
  admit(nowMs: number): number {
    const open = this.openFor(nowMs);
    if (open === 0 && this.#failures >= this.threshold) this.#openUntil = nowMs + this.cooldownMs;
    return open;
  }

  success(): void {
    this.#failures = 0;
    this.#openUntil = 0;
  }

  failure(nowMs: number): void {
    // After the cool-down, the next call is a probe: one more failure reopens at once.
    if (++this.#failures >= this.threshold) this.#openUntil = nowMs + this.cooldownMs;
  }
}

/**
 * Waits at most `timeoutMs` for `promise`, then rejects with `STORE_TIMEOUT` and stops waiting:
 * the late result is dropped and a late rejection is absorbed (never unhandled).
 */
export function withTimeout<T>(promise: Promise<T>, timeoutMs: number, storeName: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new FloodgateError("STORE_TIMEOUT", `The ${storeName} store did not answer within ${timeoutMs} ms; the call was abandoned.`)),
      timeoutMs,
    );
    promise.then(
      (value) => { clearTimeout(timer); resolve(value); },
      (error: unknown) => { clearTimeout(timer); reject(error); },
    );
  });
}

/** An error's message; anything else described (`String()` throws for an object without a prototype). */
export const errorText = (error: unknown): string => (error instanceof Error ? error.message : describeValue(error));

/** Wraps anything a store threw as a `FloodgateError` with code `STORE_ERROR` (keeping the cause). */
export function toStoreError(error: unknown, storeName: string): FloodgateError {
  // STORE_TIMEOUT, STORE_UNAVAILABLE or STORE_ERROR already.
  if (error instanceof FloodgateError && error.code.startsWith("STORE_")) return error;
  return new FloodgateError("STORE_ERROR", `The ${storeName} store failed: ${errorText(error)}`, { cause: error });
}

/** A store call's outcome, whichever way it went. */
export interface StoreOutcome {
  /** The limiter's decision; `undefined` when the store-error policy allowed or denied. */
  readonly decision: Decision | undefined;
  readonly source: DecisionSource;
  /** The store failure behind a `fallback`, `allow` or `deny` outcome. */
  readonly storeError: FloodgateError | undefined;
  /** The clock when the answer was in: what the response's header deltas are counted from. */
  readonly atMs: number;
}

/** The store-failure settings every rule of one middleware shares. */
export interface StoreFailurePolicy {
  readonly clock: () => number;
  readonly timeoutMs: number | undefined;
  /** The action for a failed call: the `onStoreError` hook's choice, else the configured action. */
  choose(error: FloodgateError, req: RateLimitRequest): StoreErrorAction;
  /** Tells `onStoreError` of a failure no request waits for (a refund), whose answer has no use. */
  report(error: FloodgateError): void;
}

const STORE_ERROR_ACTIONS: readonly StoreErrorAction[] = ["allow", "deny", "fallback"];

/** The policy that `onStoreError`, `timeoutMs` and `clock` describe. */
export function storeFailurePolicy<Raw>(
  onStoreError: HttpRateLimitOptions<Raw>["onStoreError"],
  timeoutMs: number | undefined,
  clock: () => number,
  callHook: HookCaller,
): StoreFailurePolicy {
  // The requests `choose` gets are this middleware's own, whose `raw` is a Raw.
  const hook = typeof onStoreError === "function" ? onStoreError as (error: FloodgateError, req: RateLimitRequest | undefined) => StoreErrorAction | void : undefined;
  const action: StoreErrorAction = typeof onStoreError === "string" ? onStoreError : "fallback";
  return {
    clock,
    timeoutMs,
    choose(error, req) {
      const chosen = callHook("onStoreError", hook, error, req);
      return STORE_ERROR_ACTIONS.includes(chosen as StoreErrorAction) ? chosen as StoreErrorAction : action;
    },
    report(error) {
      callHook("onStoreError", hook, error, undefined);
    },
  };
}

/** The circuit breakers of one middleware: one per store, shared by the rules on it. */
export function breakersFor(options: false | CircuitBreakerOptions | undefined): (store: RateLimitStore) => CircuitBreaker | undefined {
  const breakers = new Map<RateLimitStore, CircuitBreaker>();
  return (store) => {
    if (options === false) return undefined;
    let breaker = breakers.get(store);
    if (breaker === undefined) breakers.set(store, breaker = new CircuitBreaker(options?.failures ?? 5, options?.cooldownMs ?? 30_000));
    return breaker;
  };
}

const isThenable = <T>(v: T | Promise<T>): v is Promise<T> => typeof (v as Promise<T>)?.then === "function";
const costOption = (cost: number): { cost: number } | undefined => (cost === 1 ? undefined : { cost });

/** A rule's limiter behind the store-failure policy: the deadline, the breaker and the fallback. */
export class GuardedLimiter {
  /** The local limiter that answers when the store fails, with the same policies; made on first need. */
  #fallback: RateLimiter | undefined;

  constructor(readonly limiter: RateLimiter, readonly breaker: CircuitBreaker | undefined, readonly policy: StoreFailurePolicy) {}

  /** Ms the store's circuit stays open at `nowMs` (0: closed). */
  openForMs(nowMs: number): number {
    return this.breaker?.openFor(nowMs) ?? 0;
  }

  /**
   * Charges `cost` to `key`. A synchronous store (memory) answers at once: no promise, nothing to
   * time out. Never rejects because of the store, only for a bad argument (the caller's).
   */
  consume(key: string, cost: number, req: RateLimitRequest): StoreOutcome | Promise<StoreOutcome> {
    const { breaker, limiter, policy } = this;
    const openMs = breaker?.admit(policy.clock()) ?? 0;
    if (openMs > 0) {
      const error = new FloodgateError("STORE_UNAVAILABLE", `The ${limiter.store.name} store's circuit is open after repeated failures; retrying in ${openMs} ms.`);
      return this.#failed(key, cost, req, error, true);
    }
    let pending: Decision | Promise<Decision>;
    try {
      pending = limiter.decide(key, costOption(cost));
    } catch (thrown) {
      return this.#failed(key, cost, req, thrown, false);
    }
    if (!isThenable(pending)) {
      breaker?.success();
      return { decision: pending, source: "store", storeError: undefined, atMs: policy.clock() };
    }
    const timeoutMs = policy.timeoutMs;
    return (timeoutMs === undefined ? pending : withTimeout(pending, timeoutMs, limiter.store.name)).then(
      (decision): StoreOutcome => {
        breaker?.success();
        return { decision, source: "store", storeError: undefined, atMs: policy.clock() };
      },
      (thrown) => this.#failed(key, cost, req, thrown, false),
    );
  }

  /**
   * Gives back what `consume` charged, to the limiter that charged it (the store, or the fallback).
   * Fire and forget: skipped while the circuit is open; a failure counts against the breaker and
   * is reported to `onStoreError` (whose answer has no use here).
   */
  refund(source: DecisionSource, key: string, cost: number, charge: Charge | undefined): void {
    const { breaker, policy } = this;
    const onStore = source !== "fallback";
    const limiter = onStore ? this.limiter : this.#fallback!;
    if (onStore && this.openForMs(policy.clock()) > 0) return;
    let pending: Promise<void>;
    try {
      // Into what the request was charged in: a late refund never gives back another's units.
      pending = limiter.refund(key, charge === undefined ? costOption(cost) : { cost, charge });
    } catch {
      return;
    }
    const settled = policy.timeoutMs === undefined ? pending : withTimeout(pending, policy.timeoutMs, limiter.store.name);
    settled.then(
      () => { if (onStore) breaker?.success(); },
      (thrown: unknown) => {
        if (onStore) breaker?.failure(policy.clock());
        policy.report(toStoreError(thrown, limiter.store.name));
      },
    );
  }

  /**
   * A store call that failed: a bad argument is the caller's (rethrown); anything else counts
   * against the store's breaker (unless its circuit was open already), then the store-error
   * policy decides.
   */
  async #failed(key: string, cost: number, req: RateLimitRequest, thrown: unknown, circuitOpen: boolean): Promise<StoreOutcome> {
    if (thrown instanceof FloodgateError && thrown.code === "INVALID_ARGUMENT") throw thrown;
    const { breaker, limiter, policy } = this;
    const atMs = policy.clock();
    if (!circuitOpen) breaker?.failure(atMs);
    const storeError = toStoreError(thrown, limiter.store.name);
    const action = policy.choose(storeError, req);
    if (action !== "fallback") return { decision: undefined, source: action, storeError, atMs };
    this.#fallback ??= createRateLimiter({ policy: limiter.policies, store: memoryStore(), prefix: limiter.prefix, clock: policy.clock });
    const decision = await this.#fallback.limit(key, costOption(cost));
    return { decision, source: "fallback", storeError, atMs };
  }
}
