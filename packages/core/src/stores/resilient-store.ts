import { describeValue, FloodgateError } from "../errors.ts";
import { errorText, toStoreError, unsupported } from "./resilience/store-errors.ts";
import { parseOptions } from "../validation.ts";
import { Call } from "./resilience/call.ts";
import { Guard } from "./resilience/guard.ts";
import { OPTIONS, preciseNow, type ResilientStore, type ResilientStoreOptions } from "./resilience/options.ts";
import {
  type LeaseRequest,
  type ManyCall,
  type MaybePromise,
  type PolicySet,
  type RateLimitStore,
  SENT_AT,
  type StoreResult,
} from "./store.ts";

export { errorText, toStoreError };
export type {
  CircuitBreakerOptions,
  ResilientStore,
  ResilientStoreOptions,
  ResilientStoreStats,
  StoreEvents,
  StoreLogger,
} from "./resilience/options.ts";

// One implementation of what a failing store must never do to the app: hang a request (a deadline
// on every asynchronous call), be called while it is known to be down (a circuit breaker that
// probes with a back-off), pile up calls without limit (a bound on calls in flight), or fail
// silently (one log line when it starts failing, one when it recovers, and counters).

const RESILIENT = Symbol("floodgate.resilientStore");

/**
 * The limiter's consume on a resilient store: as `consume`, an asynchronous answer made into what
 * the caller gets by `map` before it resolves (one promise fewer per decision); a synchronous
 * one returned as it is.
 */
export const CONSUME_MAPPED: unique symbol = Symbol("consumeMapped");

/** True for a store made by {@link resilientStore}. */
export const isResilientStore = (store: RateLimitStore): store is ResilientStore => (store as { [RESILIENT]?: true })[RESILIENT] === true;

/** The store under any resilient wrapper. */
export const unwrapStore = (store: RateLimitStore): RateLimitStore => (isResilientStore(store) ? store.inner : store);

/**
 * Wraps `store` so that no call hangs past its deadline, a failing store is probed instead of
 * called, calls in flight are bounded, and its failures are logged and counted. Every failure
 * rejects with a `FloodgateError` (`STORE_ERROR`, `STORE_TIMEOUT` or `STORE_UNAVAILABLE`);
 * `createRateLimiter` wraps every store but the memory store this way by default, and the HTTP
 * middlewares turn these errors into their `onStoreError` answer.
 *
 * @param options.timeoutMs - deadline of an asynchronous call (default 1,000 ms; `false`: none)
 * @param options.circuitBreaker - default `{ failures: 5, cooldownMs: 1000 }` (no back-off)
 * @param options.maxInFlight - most unsettled calls (default 1,000)
 * @param options.logger - default `console`
 * @example
 * const store = resilientStore(redisStore({ client }), { timeoutMs: 300 });
 * const limiter = createRateLimiter({ policy: slidingWindow({ limit: 100, window: "1m" }), store });
 * // store.stats().failures for metrics
 */
export function resilientStore(store: RateLimitStore, options: ResilientStoreOptions = {}): ResilientStore {
  const o = parseOptions<ResilientStoreOptions>(options, "resilientStore()", OPTIONS);
  if (typeof store !== "object" || store === null || typeof store.consume !== "function") {
    throw new FloodgateError(
      "INVALID_ARGUMENT",
      `resilientStore(): received ${describeValue(store)} as the store; expected a store such as upstashStore() or redisStore().`,
    );
  }
  const wrapped = new ResilientStoreImpl(store, o);
  // A compound step the store lacks stays absent, so that a compound limiter sees it cannot.
  if (typeof store.consumeMany !== "function") Object.defineProperty(wrapped, "consumeMany", { value: undefined });
  return wrapped;
}

class ResilientStoreImpl extends Guard implements ResilientStore {
  readonly [RESILIENT] = true as const;
  readonly ownsClock?: boolean;
  readonly inner: RateLimitStore;

  constructor(inner: RateLimitStore, o: ResilientStoreOptions) {
    super(inner.name, inner, o);
    this.inner = inner;
    if (inner.ownsClock !== undefined) this.ownsClock = inner.ownsClock;
  }

  consume(set: PolicySet, key: string, cost: number, nowMs: number): MaybePromise<StoreResult> {
    return this[CONSUME_MAPPED](set, key, cost, nowMs, undefined) as MaybePromise<StoreResult>;
  }

  /** See {@link CONSUME_MAPPED}. No closure per call: the call keeps the arguments a late charge needs. */
  [CONSUME_MAPPED]<D>(
    set: PolicySet,
    key: string,
    cost: number,
    nowMs: number,
    map: ((result: StoreResult, cost: number) => D) | undefined,
  ): StoreResult | Promise<StoreResult | D> {
    const call = this.open<StoreResult>(nowMs, undefined);
    if (!(call instanceof Call)) return call;
    call.late = this.late;
    call.set = set;
    call.key = key;
    call.cost = cost;
    call.nowMs = nowMs;
    call.map = map as ((result: StoreResult, cost: number) => unknown) | undefined;
    const startedAt = this.timeoutMs === undefined ? 0 : (call[SENT_AT] = preciseNow());
    let pending: MaybePromise<StoreResult>;
    try {
      pending = this.inner.consume(set, key, cost, nowMs, call);
    } catch (thrown) {
      return this.failed(thrown, call.atMs, call.probe, call.cold);
    }
    return this.sent(call, pending, startedAt) as StoreResult | Promise<StoreResult | D>;
  }

  /** A compound step, guarded as a consume: a late admission's charges go back, each into what it was charged in. */
  consumeMany(calls: readonly ManyCall[], cost: number, nowMs: number): MaybePromise<readonly StoreResult[] | undefined> {
    const inner = this.inner;
    return this.call(
      nowMs,
      (signal) => inner.consumeMany!(calls, cost, nowMs, signal),
      (late) => late?.forEach((result, c) => this.late.charge(calls[c]!.set, calls[c]!.key, cost, nowMs, result)),
    );
  }

  peek(set: PolicySet, key: string, nowMs: number): MaybePromise<StoreResult> {
    return this.call(nowMs, (signal) => this.inner.peek(set, key, nowMs, signal), undefined);
  }

  refund(set: PolicySet, key: string, cost: number, nowMs: number, marks?: readonly number[]): MaybePromise<void> {
    return this.call(nowMs, () => this.inner.refund(set, key, cost, nowMs, marks), undefined);
  }

  lease(set: PolicySet, key: string, request: LeaseRequest, nowMs: number): MaybePromise<StoreResult> {
    return this.call(
      nowMs,
      (signal) => this.inner.lease!(set, key, request, nowMs, signal),
      (late) => this.late.lease(set, key, request, nowMs, late as StoreResult),
    );
  }

  reset(set: PolicySet, key: string): MaybePromise<void> {
    return this.call(undefined, () => this.inner.reset(set, key), undefined);
  }

  penalty(set: PolicySet, key: string, cost: number, nowMs: number): MaybePromise<void> {
    return this.call(nowMs, () => this.inner.penalty!(set, key, cost, nowMs), undefined);
  }

  block(set: PolicySet, key: string, durationMs: number, nowMs: number): MaybePromise<void> {
    return this.call(nowMs, () => this.inner.block!(set, key, durationMs, nowMs), undefined);
  }

  unblock(set: PolicySet, key: string): MaybePromise<void> {
    return this.call(undefined, () => this.inner.unblock!(set, key), undefined);
  }

  reserve(set: PolicySet, key: string, cost: number, nowMs: number, id: string, ttlMs: number): MaybePromise<StoreResult> {
    const inner = this.inner;
    return this.call(
      nowMs,
      (signal) => (inner.reserve === undefined ? unsupported(inner, "reserve") : inner.reserve(set, key, cost, nowMs, id, ttlMs, signal)),
      (late) => this.late.reservation(set, key, id, nowMs, late as StoreResult),
    );
  }

  settle(set: PolicySet, key: string, id: string, actual: number, nowMs: number): MaybePromise<boolean> {
    const inner = this.inner;
    return this.call(
      nowMs,
      () => (inner.settle === undefined ? unsupported(inner, "settle") : inner.settle(set, key, id, actual, nowMs)),
      undefined,
    );
  }

  dispose(): MaybePromise<void> {
    return this.inner.dispose?.();
  }

  reconnect(): MaybePromise<void> {
    return this.inner.reconnect?.();
  }
}
