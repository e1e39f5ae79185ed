import { describeValue, FloodgateError } from "../errors.ts";
import { errorText, isCallersError, toStoreError, unsupported } from "./resilience/store-errors.ts";
import { parseOptions } from "../validation.ts";
import { Breaker, PROBE } from "./resilience/breaker.ts";
import { LateAnswers } from "./resilience/late-answers.ts";
import { StoreLog } from "./resilience/store-log.ts";
import {
  DEFAULT_COOLDOWN_MS,
  DEFAULT_FAILURES,
  DEFAULT_MAX_IN_FLIGHT,
  DEFAULT_TIMEOUT_MS,
  OPTIONS,
  preciseNow,
  type ResilientStore,
  type ResilientStoreOptions,
  type ResilientStoreStats,
  type StoreLogger,
  tell,
  WARM_UP_MS,
} from "./resilience/options.ts";
import {
  type CallSignal,
  isThenable,
  type LeaseRequest,
  type ManyCall,
  type MaybePromise,
  type PolicySet,
  type RateLimitStore,
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

class ResilientStoreImpl implements ResilientStore {
  readonly [RESILIENT] = true as const;
  readonly name: string;
  readonly ownsClock?: boolean;
  readonly inner: RateLimitStore;
  readonly #timeoutMs: number | undefined;
  readonly #breaker: Breaker | undefined;
  readonly #maxInFlight: number;
  readonly #log: StoreLog;
  readonly #onFailure: ((error: FloodgateError) => void) | undefined;
  readonly #events: ResilientStoreOptions["events"];
  #calls = 0;
  #failures = 0;
  #timeouts = 0;
  #rejected = 0;
  #inFlight = 0;
  readonly #late: LateAnswers;
  #answered = false;
  /**
   * Before the store's first answer, once a call timed out (a cold start, or a store that is not
   * there): one call at a time is sent, the others fail at once, so that a store that never
   * answered does not make every request wait the full deadline. Since when (for the log), and
   * whether that one call is in flight.
   */
  #coldSinceMs: number | undefined;
  #coldProbe = false;
  #firstCallAtMs: number | undefined;
  #lastNowMs: number | undefined;
  /** When the current failure episode began, or undefined while healthy. */
  #failingSinceMs: number | undefined;
  /** Calls failed since the last success: what the recovery line reports. */
  #failedSinceSuccess = 0;

  constructor(inner: RateLimitStore, o: ResilientStoreOptions) {
    this.inner = inner;
    this.name = inner.name;
    if (inner.ownsClock !== undefined) this.ownsClock = inner.ownsClock;
    this.#timeoutMs = o.timeoutMs === false ? undefined : o.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    const b = o.circuitBreaker;
    const cooldownMs = b === false ? 0 : b?.cooldownMs ?? DEFAULT_COOLDOWN_MS;
    this.#breaker = b === false
      ? undefined
      : new Breaker(b?.failures ?? DEFAULT_FAILURES, cooldownMs, Math.max(b?.maxCooldownMs ?? cooldownMs, cooldownMs));
    this.#maxInFlight = o.maxInFlight ?? DEFAULT_MAX_IN_FLIGHT;
    this.#log = new StoreLog(this.name, o.logger === false ? undefined : o.logger ?? (globalThis as { console?: StoreLogger }).console);
    this.#onFailure = o.onFailure;
    this.#events = o.events;
    this.#late = new LateAnswers(inner, o.events?.lateCharge);
  }

  openForMs(nowMs: number): number {
    return this.#breaker?.openFor(nowMs) ?? 0;
  }

  stats(): ResilientStoreStats {
    return {
      calls: this.#calls,
      failures: this.#failures,
      timeouts: this.#timeouts,
      rejected: this.#rejected,
      inFlight: this.#inFlight,
      failing: this.#failingSinceMs !== undefined,
      lateCharges: this.#late.charges,
      lateRefunds: this.#late.refunds,
      lateRefundsFailed: this.#late.refundsFailed,
      lateReservations: this.#late.reservations,
    };
  }

  consume(set: PolicySet, key: string, cost: number, nowMs: number): MaybePromise<StoreResult> {
    return this.#call(
      nowMs,
      (signal) => this.inner.consume(set, key, cost, nowMs, signal),
      (late) => this.#late.charge(set, key, cost, nowMs, late as StoreResult),
    );
  }

  /** A compound step, guarded as a consume: a late admission's charges go back, each into what it was charged in. */
  consumeMany(calls: readonly ManyCall[], cost: number, nowMs: number): MaybePromise<readonly StoreResult[] | undefined> {
    const inner = this.inner;
    return this.#call(
      nowMs,
      (signal) => inner.consumeMany!(calls, cost, nowMs, signal),
      (late) => late?.forEach((result, c) => this.#late.charge(calls[c]!.set, calls[c]!.key, cost, nowMs, result)),
    );
  }

  peek(set: PolicySet, key: string, nowMs: number): MaybePromise<StoreResult> {
    return this.#call(nowMs, (signal) => this.inner.peek(set, key, nowMs, signal), undefined);
  }

  refund(set: PolicySet, key: string, cost: number, nowMs: number, marks?: readonly number[]): MaybePromise<void> {
    return this.#call(nowMs, () => this.inner.refund(set, key, cost, nowMs, marks), undefined);
  }

  lease(set: PolicySet, key: string, request: LeaseRequest, nowMs: number): MaybePromise<StoreResult> {
    return this.#call(
      nowMs,
      (signal) => this.inner.lease!(set, key, request, nowMs, signal),
      (late) => this.#late.lease(set, key, request, nowMs, late as StoreResult),
    );
  }

  reset(set: PolicySet, key: string): MaybePromise<void> {
    return this.#call(undefined, () => this.inner.reset(set, key), undefined);
  }

  penalty(set: PolicySet, key: string, cost: number, nowMs: number): MaybePromise<void> {
    return this.#call(nowMs, () => this.inner.penalty!(set, key, cost, nowMs), undefined);
  }

  block(set: PolicySet, key: string, durationMs: number, nowMs: number): MaybePromise<void> {
    return this.#call(nowMs, () => this.inner.block!(set, key, durationMs, nowMs), undefined);
  }

  unblock(set: PolicySet, key: string): MaybePromise<void> {
    return this.#call(undefined, () => this.inner.unblock!(set, key), undefined);
  }

  reserve(set: PolicySet, key: string, cost: number, nowMs: number, id: string, ttlMs: number): MaybePromise<StoreResult> {
    const inner = this.inner;
    return this.#call(
      nowMs,
      (signal) => (inner.reserve === undefined ? unsupported(inner, "reserve") : inner.reserve(set, key, cost, nowMs, id, ttlMs, signal)),
      (late) => this.#late.reservation(set, key, id, nowMs, late as StoreResult),
    );
  }

  settle(set: PolicySet, key: string, id: string, actual: number, nowMs: number): MaybePromise<boolean> {
    const inner = this.inner;
    return this.#call(
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

  /**
   * One guarded call. A synchronous answer passes through as it is (nothing to time out); an
   * asynchronous one races the deadline. `nowMs` is the limiter's clock (the breaker's and the
   * logs' time); `reset` passes none and gets the last time a call brought (a limiter with an
   * injected clock keeps one timeline).
   */
  #call<T>(
    nowMs: number | undefined,
    invoke: (signal: CallSignal) => MaybePromise<T>,
    onLateAnswer: ((value: T) => void) | undefined,
  ): MaybePromise<T> {
    const atMs = nowMs ?? this.#lastNowMs ?? Date.now();
    this.#lastNowMs = atMs;
    this.#calls++;
    this.#firstCallAtMs ??= atMs;
    // The bound first: a call refused here must not take the circuit's one probe.
    if (this.#inFlight >= this.#maxInFlight) {
      return this.#reject(
        new FloodgateError(
          "STORE_UNAVAILABLE",
          `The ${this.name} store has ${this.#inFlight} calls in flight already (maxInFlight ${this.#maxInFlight}); this call was not sent. The store is answering too slowly for the traffic: check its latency and load.`,
        ),
      );
    }
    const openMs = this.#breaker?.admit(atMs) ?? 0;
    const probe = openMs === PROBE;
    if (openMs > 0) {
      return this.#reject(
        new FloodgateError(
          "STORE_UNAVAILABLE",
          `The ${this.name} store's circuit is open after repeated failures; retrying in ${openMs} ms.`,
        ),
      );
    }
    let cold = false;
    if (this.#coldSinceMs !== undefined && !this.#answered) {
      if (this.#coldProbe) {
        return this.#reject(
          new FloodgateError(
            "STORE_UNAVAILABLE",
            `The ${this.name} store has not answered yet; this call was not sent while another waits for it.`,
          ),
        );
      }
      cold = this.#coldProbe = true;
    }
    const signal = { aborted: false };
    // The deadline counts from here: what the store's client does before its call returns (an
    // HTTP client builds its request synchronously) is part of the call.
    const startedAt = preciseNow();
    let pending: MaybePromise<T>;
    try {
      pending = invoke(signal);
    } catch (thrown) {
      return this.#failed(thrown, atMs, probe, cold);
    }
    if (!isThenable(pending)) {
      this.#succeeded(atMs);
      return pending;
    }
    this.#inFlight++;
    const timeoutMs = this.#timeoutMs;
    return new Promise<T>((resolve, reject) => {
      let done = false;
      const timer = timeoutMs === undefined ? undefined : setTimeout(() => {
        if (done) return;
        done = true;
        signal.aborted = true;
        this.#timeouts++;
        const error = new FloodgateError(
          "STORE_TIMEOUT",
          `The ${this.name} store did not answer within ${timeoutMs} ms; the call was abandoned.`,
        );
        // The deadline on the limiter's clock: the circuit opens from when the timeout was seen.
        this.#failed(error, atMs + timeoutMs, probe, cold).then(undefined, reject);
      }, Math.max(0, Math.ceil(timeoutMs - (preciseNow() - startedAt))));
      pending.then(
        (value) => {
          this.#inFlight--;
          if (timer !== undefined) clearTimeout(timer);
          if (done) {
            // Slow, not down: later timeouts are no cold start.
            this.#firstAnswer(this.#lastNowMs ?? atMs);
            onLateAnswer?.(value);
            return;
          }
          done = true;
          this.#succeeded(atMs);
          resolve(value);
        },
        (thrown: unknown) => {
          this.#inFlight--;
          if (timer !== undefined) clearTimeout(timer);
          if (done) return; // abandoned already: counted as its timeout
          done = true;
          this.#failed(thrown, atMs, probe, cold).then(undefined, reject);
        },
      );
    });
  }

  /** The store answered (in time or late): a cold start that was logged is logged as over. */
  #firstAnswer(atMs: number): void {
    if (this.#answered) return;
    this.#answered = true;
    const since = this.#coldSinceMs;
    if (since !== undefined) this.#log.firstAnswer(atMs - since);
  }

  #succeeded(atMs: number): void {
    this.#firstAnswer(atMs);
    const openMs = this.#breaker?.success(atMs) ?? -1;
    if (openMs >= 0) tell(() => this.#events?.circuitClosed?.(this.name, openMs));
    const since = this.#failingSinceMs;
    const failed = this.#failedSinceSuccess;
    this.#failedSinceSuccess = 0;
    if (since === undefined) return;
    this.#failingSinceMs = undefined;
    this.#log.recovered(atMs - since, failed);
  }

  /** A failed call: a bad argument is the caller's (rethrown as is); anything else is the store's. */
  #failed(thrown: unknown, atMs: number, probe: boolean, cold: boolean): Promise<never> {
    if (cold) this.#coldProbe = false;
    if (isCallersError(thrown)) return Promise.reject(thrown);
    const error = toStoreError(thrown, this.name);
    const timeout = error.code === "STORE_TIMEOUT";
    const coldTimeout = timeout && !this.#answered && atMs - this.#firstCallAtMs! < WARM_UP_MS;
    if (coldTimeout && this.#coldSinceMs === undefined) {
      // Logged at once: a mistyped host or a store not up yet must not go unnoticed for the warm-up.
      this.#coldSinceMs = atMs;
      this.#log.coldTimeout(atMs - this.#firstCallAtMs!, error);
    }
    if (!coldTimeout) {
      // A circuit opened by timeouts: the connection may be half-open, and every probe sent on
      // it would time out too; the store replaces it (when it can) before the next probe.
      if (this.#breaker?.failure(atMs, probe) === true) {
        if (timeout) this.#reconnectInner();
        tell(() => this.#events?.circuitOpened?.(this.name, this.#breaker!.openFor(atMs)));
      }
      if (this.#failingSinceMs === undefined) {
        this.#failingSinceMs = atMs;
        this.#log.failing(error);
      }
    }
    return this.#reject(error);
  }

  #reconnectInner(): void {
    try {
      const done = this.inner.reconnect?.();
      if (isThenable(done)) done.then(undefined, () => undefined);
    } catch {
      // A store that cannot reconnect keeps its connection; the breaker still probes it.
    }
  }

  #reject(error: FloodgateError): Promise<never> {
    this.#failures++;
    this.#failedSinceSuccess++;
    if (error.code === "STORE_UNAVAILABLE") this.#rejected++;
    try {
      this.#onFailure?.(error);
      this.#events?.failure?.(this.name, error);
    } catch {
      // An observer's bug must not change the call's outcome.
    }
    return Promise.reject(error);
  }
}
