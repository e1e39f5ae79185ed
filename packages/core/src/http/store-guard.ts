import { FloodgateError } from "../errors.ts";
import { type Charge, createRateLimiter, type Decision, type RateLimiter, rebindLimiter } from "../limiter/index.ts";
import type { Reservation } from "../limiter/index.ts";
import { memoryStore } from "../stores/memory-store.ts";
import {
  isResilientStore,
  type ResilientStore,
  resilientStore,
  type ResilientStoreOptions,
  toStoreError,
} from "../stores/resilient-store.ts";
import { isThenable, type RateLimitStore, type StoreSource } from "../stores/store.ts";
import type { HookCaller } from "./hooks.ts";
import type { HttpRateLimitOptions, RateLimitRequest } from "./options.ts";

// The store-failure policy: what a failed store call becomes for a request (the local fallback
// limiter, an allow or a deny, as `onStoreError` says). The deadline, the circuit breaker and the
// bound on calls in flight are the resilient store's (stores/resilient-store.ts).

/** What to do when the store fails, times out, or its circuit is open. */
export type StoreErrorAction = "allow" | "deny" | "fallback";

export type { CircuitBreakerOptions } from "../stores/resilient-store.ts";
export { errorText, toStoreError } from "../stores/resilient-store.ts";

/**
 * Where a request's decision came from: the store (`"store"`: its backend; `"cache"`: its local
 * deny cache, see {@link StoreSource}), this instance's lease (`"lease"`, leased mode), the local
 * fallback limiter, the store-error policy (`"allow"`, `"deny"`), or the `denyList` (refused
 * before anything was counted).
 */
export type DecisionSource = StoreSource | "lease" | "fallback" | "allow" | "deny" | "denyList";

/** A store call's outcome, whichever way it went. */
export interface StoreOutcome {
  /** The limiter's decision; `undefined` when the store-error policy allowed or denied. */
  readonly decision: Decision | undefined;
  readonly source: DecisionSource;
  /** The store failure behind a `fallback`, `allow` or `deny` outcome. */
  readonly storeError: FloodgateError | undefined;
  /** The clock when the answer was in: what the response's header deltas are counted from. */
  readonly atMs: number;
  /** An admitted reservation, to settle or cancel when the response ends ({@link GuardedLimiter.reserve}). */
  readonly reservation?: Reservation | undefined;
}

/** The store-failure settings every rule of one middleware shares. */
export interface StoreFailurePolicy {
  readonly clock: () => number;
  /** The action for a failed call: the `onStoreError` hook's choice, else the configured action. */
  choose(error: FloodgateError, req: RateLimitRequest): StoreErrorAction;
  /** Tells `onStoreError` of a failure no request waits for (a refund), whose answer has no use. */
  report(error: FloodgateError): void;
}

const STORE_ERROR_ACTIONS: readonly StoreErrorAction[] = ["allow", "deny", "fallback"];

/** The policy that `onStoreError` and `clock` describe. */
export function storeFailurePolicy<Raw>(
  onStoreError: HttpRateLimitOptions<Raw>["onStoreError"],
  clock: () => number,
  callHook: HookCaller,
): StoreFailurePolicy {
  // The requests `choose` gets are this middleware's own, whose `raw` is a Raw.
  const hook = typeof onStoreError === "function"
    ? onStoreError as (error: FloodgateError, req: RateLimitRequest | undefined) => StoreErrorAction | void
    : undefined;
  const action: StoreErrorAction = typeof onStoreError === "string" ? onStoreError : "fallback";
  return {
    clock,
    choose(error, req) {
      const chosen = callHook("onStoreError", hook, error, req);
      return STORE_ERROR_ACTIONS.includes(chosen as StoreErrorAction) ? chosen as StoreErrorAction : action;
    },
    report(error) {
      callHook("onStoreError", hook, error, undefined);
    },
  };
}

/**
 * The store guard of one middleware: each rule's limiter rebuilt over its store behind one
 * resilient wrapper per store (the deadline, the breaker and the in-flight bound, with this
 * middleware's `timeoutMs`, `circuitBreaker` and `logger`), shared by the rules on it. The memory
 * store answers synchronously and is used as it is; a store the app wrapped itself keeps its wrapper.
 */
export function storeGuard(
  options: Pick<ResilientStoreOptions, "timeoutMs" | "circuitBreaker" | "logger">,
): (limiter: RateLimiter) => RateLimiter {
  const guarded = new Map<RateLimitStore, ResilientStore>();
  const wrap = (bare: RateLimitStore): RateLimitStore => {
    if (bare.synchronous === true || isResilientStore(bare)) return bare;
    let store = guarded.get(bare);
    if (store === undefined) guarded.set(bare, store = resilientStore(bare, options));
    return store;
  };
  return (limiter) => rebindLimiter(limiter, wrap);
}

const costOption = (cost: number): { cost: number } | undefined => (cost === 1 ? undefined : { cost });

/** A rule's limiter behind the store-failure policy: what a failed store call becomes for the request. */
export class GuardedLimiter {
  /** The local limiter that answers when the store fails, with the same policies; made on first need. */
  #fallback: RateLimiter | undefined;
  readonly #store: ResilientStore | undefined;

  constructor(readonly limiter: RateLimiter, readonly policy: StoreFailurePolicy) {
    this.#store = isResilientStore(limiter.store) ? limiter.store : undefined;
  }

  /** Ms the store's circuit stays open at `nowMs` (0: closed). */
  openForMs(nowMs: number): number {
    return this.#store?.openForMs(nowMs) ?? 0;
  }

  /**
   * Charges `cost` to `key`. A synchronous store (memory) answers at once: no promise, nothing to
   * time out. Never rejects because of the store, only for a bad argument (the caller's).
   */
  consume(key: string, cost: number, req: RateLimitRequest): StoreOutcome | Promise<StoreOutcome> {
    const { limiter, policy } = this;
    let pending: Decision | Promise<Decision>;
    try {
      pending = limiter.decide(key, costOption(cost));
    } catch (thrown) {
      return this.#failed(key, cost, req, thrown);
    }
    if (!isThenable(pending)) return { decision: pending, source: pending.source, storeError: undefined, atMs: policy.clock() };
    return pending.then(
      (decision): StoreOutcome => ({ decision, source: decision.source, storeError: undefined, atMs: policy.clock() }),
      (thrown) => this.#failed(key, cost, req, thrown),
    );
  }

  /**
   * Reserves `estimate` for `key` (and a unit of every concurrency policy), to settle or cancel
   * when the response ends: as {@link consume}, the store's answer or the store-failure policy's.
   */
  reserve(key: string, estimate: number, req: RateLimitRequest): StoreOutcome | Promise<StoreOutcome> {
    const { limiter, policy } = this;
    const reserved = (reservation: Reservation): StoreOutcome => ({
      decision: reservation.decision,
      source: "store",
      storeError: undefined,
      atMs: policy.clock(),
      reservation: reservation.decision.allowed ? reservation : undefined,
    });
    let pending: Reservation | Promise<Reservation>;
    try {
      pending = limiter.reserve(key, { estimate });
    } catch (thrown) {
      return this.#failed(key, estimate, req, thrown, true);
    }
    if (!isThenable(pending)) return reserved(pending);
    return pending.then(reserved, (thrown) => this.#failed(key, estimate, req, thrown, true));
  }

  /**
   * Settles a reservation at `actual` units, or cancels it (`undefined`): once, where it was made
   * (the store, or the fallback). The promise never rejects: a failure goes to `onStoreError`.
   */
  finish(source: DecisionSource, reservation: Reservation, actual: number | undefined): Promise<void> {
    const store = (source === "fallback" ? this.#fallback! : this.limiter).store;
    let pending: Promise<boolean>;
    try {
      pending = actual === undefined ? reservation.cancel() : reservation.settle(actual);
    } catch (thrown) {
      pending = Promise.reject(thrown);
    }
    return pending.then(() => {}, (thrown: unknown) => this.policy.report(toStoreError(thrown, store.name)));
  }

  /**
   * Gives back what `consume` charged, to the limiter that charged it (the store, or the fallback).
   * Skipped while the circuit is open; a failure (which counts against the breaker) is reported to
   * `onStoreError`, whose answer has no use here. The promise never rejects.
   */
  refund(source: DecisionSource, key: string, cost: number, charge: Charge | undefined): Promise<void> | undefined {
    const { policy } = this;
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
    return pending.then(undefined, (thrown: unknown) => policy.report(toStoreError(thrown, limiter.store.name)));
  }

  /**
   * Flushes the limiter and the fallback limiter, if one was made (see `RateLimiter.flush`). A
   * failure (a lease that could not be given back) goes to `onStoreError`; never rejects.
   */
  async flush(): Promise<void> {
    const results = await Promise.allSettled([this.limiter.flush(), this.#fallback?.flush()]);
    for (const result of results) {
      if (result.status === "rejected") this.policy.report(toStoreError(result.reason, this.limiter.store.name));
    }
  }

  /** Clears `key` in the store (a failure rejects) and in the fallback limiter, if one was made. */
  async reset(key: string): Promise<void> {
    await this.#fallback?.reset(key);
    await this.limiter.reset(key);
  }

  /** A store call that failed: a bad argument is the caller's (rethrown); anything else, the store-error policy decides. */
  async #failed(key: string, cost: number, req: RateLimitRequest, thrown: unknown, reserve = false): Promise<StoreOutcome> {
    if (thrown instanceof FloodgateError && thrown.code === "INVALID_ARGUMENT") throw thrown;
    const { limiter, policy } = this;
    const atMs = policy.clock();
    const storeError = toStoreError(thrown, limiter.store.name);
    const action = policy.choose(storeError, req);
    if (action !== "fallback") return { decision: undefined, source: action, storeError, atMs };
    this.#fallback ??= createRateLimiter({ policy: limiter.policies, store: memoryStore(), prefix: limiter.prefix, clock: policy.clock });
    if (reserve) {
      const reservation = await this.#fallback.reserve(key, { estimate: cost });
      const decision = reservation.decision;
      return { decision, source: "fallback", storeError, atMs, reservation: decision.allowed ? reservation : undefined };
    }
    const decision = await this.#fallback.limit(key, costOption(cost));
    return { decision, source: "fallback", storeError, atMs };
  }
}
