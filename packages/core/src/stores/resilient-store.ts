import { FIELDS_PER_POLICY } from "../algorithms/algorithm.ts";
import { describeValue, FloodgateError } from "../errors.ts";
import { isFunction, objectOf, type OptionSpecs, parseOptions, whole } from "../validation.ts";
import {
  type CallSignal,
  isThenable,
  type LeaseRequest,
  type MaybePromise,
  type PolicySet,
  type RateLimitStore,
  type StoreResult,
} from "./store.ts";

// One implementation of what a failing store must never do to the app: hang a request (a deadline
// on every asynchronous call), be called while it is known to be down (a circuit breaker that
// probes with a back-off), pile up calls without limit (a bound on calls in flight), or fail
// silently (one log line when it starts failing, one when it recovers, and counters).

/** Options of the circuit breaker that stops calling a failing store. */
export interface CircuitBreakerOptions {
  /** Consecutive failures (errors or timeouts) that open the circuit (default 5). */
  failures?: number;
  /**
   * How long the circuit stays open, in ms (default 1,000); then one call probes the store, and
   * its success closes the circuit. One probe a second per process is negligible load on a store,
   * and it brings decisions back on the store within a second (plus the probe's round trip) of
   * its return, however long it was down.
   */
  cooldownMs?: number;
  /**
   * To back off: each failed probe doubles the cool-down, from `cooldownMs` up to this many ms
   * (default `cooldownMs`: no doubling). The store's return can then wait up to this long.
   */
  maxCooldownMs?: number;
}

/** Where a resilient store writes that its store started failing or recovered (default `console`). */
export interface StoreLogger {
  /** Receives the line saying the store started failing (and the recovery line without `info`). */
  warn(message: string): void;
  /** Used for the recovery line when present; else `warn`. */
  info?(message: string): void;
}

/** Options of {@link resilientStore}. */
export interface ResilientStoreOptions {
  /**
   * Abandon an asynchronous store call after this many ms with `STORE_TIMEOUT` (default 1,000:
   * above a far-region Upstash round trip's p99, below a typical HTTP client's timeout); `false`
   * for none. A store that answers synchronously (the memory store) is never timed.
   */
  timeoutMs?: number | false;
  /** Stop calling a failing store for a cool-down (default `{ failures: 5, cooldownMs: 1000 }`, probing once a second); `false` to disable. */
  circuitBreaker?: false | CircuitBreakerOptions;
  /** Most calls this store may have in flight; further calls fail at once with `STORE_UNAVAILABLE` (default 1,000). */
  maxInFlight?: number;
  /** Where the failing and recovered lines go (default `console`); `false` for nowhere. */
  logger?: StoreLogger | false;
  /** Called with every failed call's error (`STORE_ERROR`, `STORE_TIMEOUT`, `STORE_UNAVAILABLE`), e.g. to count them. */
  onFailure?: (error: FloodgateError) => void;
}

/** A resilient store's counters since it was made. */
export interface ResilientStoreStats {
  /** Calls made through the wrapper. */
  readonly calls: number;
  /** Calls that failed: the store's errors, timeouts and calls not sent (`rejected`). */
  readonly failures: number;
  /** Calls abandoned at their deadline. */
  readonly timeouts: number;
  /** Calls failed without calling the store: circuit open, or `maxInFlight` reached. */
  readonly rejected: number;
  /** Calls to the store that have not settled yet, abandoned ones included. */
  readonly inFlight: number;
  /** True from the first failure that counts against the breaker until the next success. */
  readonly failing: boolean;
  /**
   * Consumes abandoned at their deadline that the store later admitted and charged: units
   * charged for requests that got the store-failure answer instead. Each is given back once,
   * into what it was charged in, when the store returned its charge's marks (every store of
   * this package does); see `lateRefunds`.
   */
  readonly lateCharges: number;
  /** Late charges given back: refunded once, into the window or state they went into. */
  readonly lateRefunds: number;
  /**
   * Late charges whose refund failed (the store failed again, or returned no marks): they stay
   * charged, unless the refund ran and only its reply was lost. Never retried, for that reason.
   * Settled once `lateRefunds + lateRefundsFailed === lateCharges`.
   */
  readonly lateRefundsFailed: number;
  /**
   * Reservations abandoned at their deadline that the store later admitted: each is cancelled
   * once (by its id), as the request got the failure answer; counted in `lateRefunds` once done.
   */
  readonly lateReservations: number;
}

/** A store behind a deadline, a circuit breaker and a bound on calls in flight. */
export interface ResilientStore extends RateLimitStore {
  /** The store it wraps. */
  readonly inner: RateLimitStore;
  /** Ms the circuit stays open from `nowMs` (0: closed, the store is called). */
  openForMs(nowMs: number): number;
  /** The counters since the wrapper was made: calls, failures, timeouts, late charges... */
  stats(): ResilientStoreStats;
}

const DEFAULT_TIMEOUT_MS = 1000;
const DEFAULT_FAILURES = 5;
const DEFAULT_COOLDOWN_MS = 1000;
const DEFAULT_MAX_IN_FLIGHT = 1000;
/**
 * Before the store's first answer, a timeout is a cold start (connecting, loading scripts) more
 * often than a fault: for this long after the first call it does not count against the breaker.
 */
const WARM_UP_MS = 10_000;

/** Ms with sub-ms precision where the runtime has `performance` (every current one), else `Date.now()`. */
const preciseNow: () => number = typeof globalThis.performance?.now === "function" ? () => globalThis.performance.now() : () => Date.now();

const OPTIONS: OptionSpecs = {
  timeoutMs: [(v) => v === false || whole(1, 60_000)(v), "a whole number of milliseconds from 1 to 60000, or false (no deadline)"],
  circuitBreaker: [
    (v) => v === false || objectOf({ failures: whole(1), cooldownMs: whole(1), maxCooldownMs: whole(1) })(v),
    "false or { failures?: whole number >= 1, cooldownMs?: whole number >= 1, maxCooldownMs?: whole number >= 1 }",
  ],
  maxInFlight: [whole(1), "a whole number >= 1"],
  logger: [
    (v) => v === false || (typeof v === "object" && v !== null && typeof (v as StoreLogger).warn === "function"),
    "false or an object with a warn(message) method, such as console",
  ],
  onFailure: [isFunction, "a function called with each failure's FloodgateError"],
};

const RESILIENT = Symbol("floodgate.resilientStore");

/** True for a store made by {@link resilientStore}. */
export const isResilientStore = (store: RateLimitStore): store is ResilientStore => (store as { [RESILIENT]?: true })[RESILIENT] === true;

/** The store under any resilient wrapper. */
export const unwrapStore = (store: RateLimitStore): RateLimitStore => (isResilientStore(store) ? store.inner : store);

/** An error's message; anything else described (`String()` throws for an object without a prototype). */
export const errorText = (error: unknown): string => (error instanceof Error ? error.message : describeValue(error));

/** Wraps anything a store threw as a `FloodgateError` with code `STORE_ERROR` (keeping the cause). */
export function toStoreError(error: unknown, storeName: string): FloodgateError {
  // STORE_TIMEOUT, STORE_UNAVAILABLE or STORE_ERROR already.
  if (error instanceof FloodgateError && error.code.startsWith("STORE_")) return error;
  return new FloodgateError("STORE_ERROR", `The ${storeName} store failed: ${errorText(error)}`, { cause: error });
}

const isCallersError = (error: unknown): boolean => error instanceof FloodgateError && error.code === "INVALID_ARGUMENT";

/** What {@link Breaker.admit} answers for the call that probes the store after a cool-down. */
const PROBE = -1;

/**
 * Counts consecutive failures; opens after `threshold`, for a cool-down (doubling with each
 * failed probe up to `maxCooldownMs`, when that is above `cooldownMs`). While open, the store is
 * not called; after the cool-down exactly one call probes it, and its success closes the circuit
 * at once. Failures of calls sent before the circuit opened change nothing: a stall fails
 * hundreds at once, which is one outage.
 */
class Breaker {
  #failures = 0;
  #open = false;
  #openUntil = 0;
  #nextCooldownMs: number;
  /** While a probe is in flight: until when it holds the circuit (a probe that never settles frees it then). */
  #probeUntil = 0;

  constructor(readonly threshold: number, readonly cooldownMs: number, readonly maxCooldownMs: number) {
    this.#nextCooldownMs = cooldownMs;
  }

  openFor(nowMs: number): number {
    if (!this.#open) return 0;
    const until = Math.max(this.#probeUntil, this.#openUntil);
    return until > nowMs ? until - nowMs : 0;
  }

  /** Before a call: ms left open (do not call), 0 (call), or PROBE (call: the one probe). */
  admit(nowMs: number): number {
    if (!this.#open) return 0;
    const open = this.openFor(nowMs);
    if (open > 0) return open;
    this.#probeUntil = nowMs + this.#nextCooldownMs;
    return PROBE;
  }

  success(): void {
    this.#failures = 0;
    this.#open = false;
    this.#probeUntil = 0;
    this.#nextCooldownMs = this.cooldownMs;
  }

  failure(nowMs: number, probe: boolean): void {
    if (this.#open) {
      if (!probe) return;
      this.#probeUntil = 0;
    } else if (++this.#failures < this.threshold) return;
    this.#open = true;
    this.#openUntil = nowMs + this.#nextCooldownMs;
    this.#nextCooldownMs = Math.min(this.#nextCooldownMs * 2, this.maxCooldownMs);
  }
}

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
  return new ResilientStoreImpl(store, o);
}

class ResilientStoreImpl implements ResilientStore {
  readonly [RESILIENT] = true as const;
  readonly name: string;
  readonly ownsClock?: boolean;
  readonly inner: RateLimitStore;
  readonly #timeoutMs: number | undefined;
  readonly #breaker: Breaker | undefined;
  readonly #maxInFlight: number;
  readonly #logger: StoreLogger | undefined;
  readonly #onFailure: ((error: FloodgateError) => void) | undefined;
  #calls = 0;
  #failures = 0;
  #timeouts = 0;
  #rejected = 0;
  #inFlight = 0;
  #lateCharges = 0;
  #lateRefunds = 0;
  #lateRefundsFailed = 0;
  #lateReservations = 0;
  #answered = false;
  #firstCallAtMs: number | undefined;
  #lastNowMs: number | undefined;
  /** The clock when the current failure episode began, or undefined while healthy. */
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
    this.#logger = o.logger === false ? undefined : o.logger ?? (globalThis as { console?: StoreLogger }).console;
    this.#onFailure = o.onFailure;
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
      lateCharges: this.#lateCharges,
      lateRefunds: this.#lateRefunds,
      lateRefundsFailed: this.#lateRefundsFailed,
      lateReservations: this.#lateReservations,
    };
  }

  consume(set: PolicySet, key: string, cost: number, nowMs: number): MaybePromise<StoreResult> {
    return this.#call(
      nowMs,
      (signal) => this.inner.consume(set, key, cost, nowMs, signal),
      (late) => this.#lateCharge(set, key, cost, nowMs, late as StoreResult),
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
      (late) => this.#lateLease(set, key, request, nowMs, late as StoreResult),
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
      (late) => this.#lateReservation(set, key, id, nowMs, late as StoreResult),
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
    const signal = { aborted: false };
    // The deadline counts from here: what the store's client does before its call returns (an
    // HTTP client builds its request synchronously) is part of the call.
    const startedAt = preciseNow();
    let pending: MaybePromise<T>;
    try {
      pending = invoke(signal);
    } catch (thrown) {
      return this.#failed(thrown, atMs, probe);
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
        this.#failed(error, atMs + timeoutMs, probe).then(undefined, reject);
      }, Math.max(0, Math.ceil(timeoutMs - (preciseNow() - startedAt))));
      pending.then(
        (value) => {
          this.#inFlight--;
          if (timer !== undefined) clearTimeout(timer);
          if (done) {
            // Slow, not down: later timeouts are no cold start.
            this.#answered = true;
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
          this.#failed(thrown, atMs, probe).then(undefined, reject);
        },
      );
    });
  }

  /**
   * The late answer of a consume abandoned at its deadline. When the store admitted it, its units
   * are charged to a request that got the failure answer: they go back once, into what they were
   * charged in (the marks that follow the figures), never by key and cost alone, which could land
   * in a later window on someone else's units. A store that returns no marks keeps them (counted).
   */
  #lateCharge(set: PolicySet, key: string, cost: number, nowMs: number, result: StoreResult): void {
    if (result[0] !== 1) return;
    this.#lateCharges++;
    // The marks follow the figures; a store that returns none keeps the charge.
    const at = 1 + set.policies.length * FIELDS_PER_POLICY;
    if (result.length <= at) {
      this.#lateRefundsFailed++;
      return;
    }
    const marks = result.slice(at);
    // A refund that throws or rejects leaves the charge in place: it stays counted, not refunded.
    new Promise<void>((resolve) => resolve(this.inner.refund(set, key, cost, nowMs, marks))).then(
      () => this.#lateRefunds++,
      () => this.#lateRefundsFailed++,
    );
  }

  /**
   * The late answer of a reservation abandoned at its deadline: when admitted, it is cancelled
   * once, by its id (settled at 0: everything back, concurrency units released). A settle is
   * idempotent, so a client's own retry of it cannot count twice.
   */
  #lateReservation(set: PolicySet, key: string, id: string, nowMs: number, result: StoreResult): void {
    if (result[0] !== 1) return;
    this.#lateReservations++;
    new Promise<boolean>((resolve) => resolve(this.inner.settle!(set, key, id, 0, nowMs))).then(
      () => this.#lateRefunds++,
      () => undefined,
    );
  }

  /**
   * The late answer of a lease call abandoned at its deadline: the request's units go back as a
   * late charge's do, and a granted lease is returned whole (once: by its id), since no one
   * holds it.
   */
  #lateLease(set: PolicySet, key: string, request: LeaseRequest, nowMs: number, result: StoreResult): void {
    const count = set.policies.length;
    const at = 1 + count * FIELDS_PER_POLICY;
    if (request.cost > 0) this.#lateCharge(set, key, request.cost, nowMs, result.slice(0, at + count));
    const granted = result[at + count] ?? 0;
    if (result[0] !== 1 || granted <= 0) return;
    const back: LeaseRequest = {
      cost: 0,
      want: 0,
      lifeMs: 0,
      minLifeMs: 0,
      id: `${request.id}-r`,
      returns: [{ id: request.id, unspent: granted }],
    };
    new Promise<unknown>((resolve) => resolve(this.inner.lease!(set, key, back, nowMs))).then(() => undefined, () => undefined);
  }

  #succeeded(atMs: number): void {
    this.#answered = true;
    this.#breaker?.success();
    const since = this.#failingSinceMs;
    const failed = this.#failedSinceSuccess;
    this.#failedSinceSuccess = 0;
    if (since === undefined) return;
    this.#failingSinceMs = undefined;
    this.#log(
      "info",
      `The ${this.name} store answers again, after failing for ${Math.max(0, atMs - since)} ms; ${failed} ${
        failed === 1 ? "call" : "calls"
      } failed meanwhile.`,
    );
  }

  /** A failed call: a bad argument is the caller's (rethrown as is); anything else is the store's. */
  #failed(thrown: unknown, atMs: number, probe: boolean): Promise<never> {
    if (isCallersError(thrown)) return Promise.reject(thrown);
    const error = toStoreError(thrown, this.name);
    const coldTimeout = error.code === "STORE_TIMEOUT" && !this.#answered && atMs - this.#firstCallAtMs! < WARM_UP_MS;
    if (!coldTimeout) {
      this.#breaker?.failure(atMs, probe);
      if (this.#failingSinceMs === undefined) {
        this.#failingSinceMs = atMs;
        this.#log(
          "warn",
          `The ${this.name} store is failing (${error.code}: ${error.message}). Calls fail until it answers again, and limits follow the store-failure policy meanwhile. ` +
            "Check that the store is reachable from this process, and its address, credentials and load.",
        );
      }
    }
    return this.#reject(error);
  }

  #reject(error: FloodgateError): Promise<never> {
    this.#failures++;
    this.#failedSinceSuccess++;
    if (error.code === "STORE_UNAVAILABLE") this.#rejected++;
    try {
      this.#onFailure?.(error);
    } catch {
      // An observer's bug must not change the call's outcome.
    }
    return Promise.reject(error);
  }

  #log(level: "warn" | "info", message: string): void {
    const logger = this.#logger;
    if (logger === undefined) return;
    try {
      if (level === "info" && typeof logger.info === "function") logger.info(`[floodgate] ${message}`);
      else logger.warn(`[floodgate] ${message}`);
    } catch {
      // A broken logger must not break the call.
    }
  }
}

/** A wrapped store without reservations: the caller's error (INVALID_ARGUMENT), not the store's failing. */
function unsupported(store: RateLimitStore, operation: string): never {
  throw new FloodgateError(
    "INVALID_ARGUMENT",
    `The ${store.name} store does not implement ${operation}(); reservations need a store that does.`,
  );
}
