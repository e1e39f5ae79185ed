import { FloodgateError } from "../errors.ts";
import { type Charge, createRateLimiter, type Decision, type RateLimiter } from "../limiter/index.ts";
import type { Reservation } from "../limiter/index.ts";
import { memoryStore } from "../stores/memory-store.ts";
import { isResilientStore, type ResilientStore, toStoreError } from "../stores/resilient-store.ts";
import { isThenable } from "../stores/store.ts";
import type { RateLimitRequest } from "./options.ts";
import type { DecisionSource, StoreErrorHandling, StoreOutcome } from "./store-errors.ts";

// A rule's limiter behind the store-error handling: a failed store call becomes the local
// fallback limiter's answer, an allow or a deny, and what was charged is given back or settled
// where it was charged.

const costOption = (cost: number): { cost: number } | undefined => (cost === 1 ? undefined : { cost });

/** A rule's limiter behind the store-error handling: what a failed store call becomes for the request. */
export class FailoverLimiter {
  /** The local limiter that answers when the store fails, with the same policies; made on first need. */
  #fallback: RateLimiter | undefined;
  readonly #store: ResilientStore | undefined;

  constructor(readonly limiter: RateLimiter, readonly onError: StoreErrorHandling) {
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
    const { limiter, onError } = this;
    let pending: Decision | Promise<Decision>;
    try {
      pending = limiter.decide(key, costOption(cost));
    } catch (thrown) {
      return this.#failed(key, cost, req, thrown);
    }
    if (!isThenable(pending)) return { decision: pending, source: pending.source, storeError: undefined, atMs: onError.clock() };
    return pending.then(
      (decision): StoreOutcome => ({ decision, source: decision.source, storeError: undefined, atMs: onError.clock() }),
      (thrown) => this.#failed(key, cost, req, thrown),
    );
  }

  /**
   * Reserves `estimate` for `key` (and a unit of every concurrency policy), to settle or cancel
   * when the response ends: as {@link consume}, the store's answer or the store-error handling's.
   */
  reserve(key: string, estimate: number, req: RateLimitRequest): StoreOutcome | Promise<StoreOutcome> {
    const { limiter, onError } = this;
    const reserved = (reservation: Reservation): StoreOutcome => ({
      decision: reservation.decision,
      source: "store",
      storeError: undefined,
      atMs: onError.clock(),
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
    return pending.then(() => {}, (thrown: unknown) => this.onError.report(toStoreError(thrown, store.name)));
  }

  /**
   * Gives back what `consume` charged, to the limiter that charged it (the store, or the fallback).
   * Skipped while the circuit is open; a failure (which counts against the breaker) is reported to
   * `onStoreError`, whose answer has no use here. The promise never rejects.
   */
  refund(source: DecisionSource, key: string, cost: number, charge: Charge | undefined): Promise<void> | undefined {
    const { onError } = this;
    const onStore = source !== "fallback";
    const limiter = onStore ? this.limiter : this.#fallback!;
    if (onStore && this.openForMs(onError.clock()) > 0) return;
    let pending: Promise<void>;
    try {
      // Into what the request was charged in: a late refund never gives back another's units.
      pending = limiter.refund(key, charge === undefined ? costOption(cost) : { cost, charge });
    } catch {
      return;
    }
    return pending.then(undefined, (thrown: unknown) => onError.report(toStoreError(thrown, limiter.store.name)));
  }

  /**
   * Flushes the limiter and the fallback limiter, if one was made (see `RateLimiter.flush`). A
   * failure (a lease that could not be given back) goes to `onStoreError`; never rejects.
   */
  async flush(): Promise<void> {
    const results = await Promise.allSettled([this.limiter.flush(), this.#fallback?.flush()]);
    for (const result of results) {
      if (result.status === "rejected") this.onError.report(toStoreError(result.reason, this.limiter.store.name));
    }
  }

  /** Clears `key` in the store (a failure rejects) and in the fallback limiter, if one was made. */
  async reset(key: string): Promise<void> {
    await this.#fallback?.reset(key);
    await this.limiter.reset(key);
  }

  /** A store call that failed: a bad argument is the caller's (rethrown); anything else, the store-error handling decides. */
  async #failed(key: string, cost: number, req: RateLimitRequest, thrown: unknown, reserve = false): Promise<StoreOutcome> {
    if (thrown instanceof FloodgateError && thrown.code === "INVALID_ARGUMENT") throw thrown;
    const { limiter, onError } = this;
    const atMs = onError.clock();
    const storeError = toStoreError(thrown, limiter.store.name);
    const action = onError.choose(storeError, req);
    if (action !== "fallback") return { decision: undefined, source: action, storeError, atMs };
    this.#fallback ??= createRateLimiter({
      policy: limiter.policies,
      store: memoryStore(),
      prefix: limiter.prefix,
      clock: onError.clock,
      // The shadow policies and warnings too: a fallback decision reports what the store's would.
      ...(limiter.shadowPolicies === undefined || limiter.shadowPolicies.length === 0 ? {} : { shadowPolicy: limiter.shadowPolicies }),
      ...(limiter.warnAt === undefined ? {} : { warnAt: limiter.warnAt }),
    });
    if (reserve) {
      const reservation = await this.#fallback.reserve(key, { estimate: cost });
      const decision = reservation.decision;
      return { decision, source: "fallback", storeError, atMs, reservation: decision.allowed ? reservation : undefined };
    }
    const decision = await this.#fallback.limit(key, costOption(cost));
    return { decision, source: "fallback", storeError, atMs };
  }
}
