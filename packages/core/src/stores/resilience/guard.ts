// The guarded calls of the resilient store (../resilient-store.ts): the deadline, the circuit
// breaker, the bound on calls in flight, the cold start, the logs and the counters.

import type { FloodgateError } from "../../errors.ts";
import { type CallSignal, isThenable, type MaybePromise, type RateLimitStore, SENT_AT, type StoreResult } from "../store.ts";
import { Breaker, PROBE } from "./breaker.ts";
import { Call, type CallOwner, EXPIRE, promiseOf } from "./call.ts";
import { Deadlines } from "./deadlines.ts";
import { LateAnswers } from "./late-answers.ts";
import {
  DEFAULT_COOLDOWN_MS,
  DEFAULT_FAILURES,
  DEFAULT_MAX_IN_FLIGHT,
  DEFAULT_TIMEOUT_MS,
  preciseNow,
  type ResilientStoreOptions,
  type ResilientStoreStats,
  type StoreLogger,
  tell,
  WARM_UP_MS,
} from "./options.ts";
import { circuitOpen, coldWaiting, inFlightFull, isCallersError, timedOut, toStoreError } from "./store-errors.ts";
import { StoreLog } from "./store-log.ts";

/**
 * What the resilient store does around every call of the store it wraps; its operations (the
 * subclass) each make their call through {@link Guard.call}, or, for a consume, through
 * {@link Guard.open} and {@link Guard.sent} with no closure.
 */
export abstract class Guard implements CallOwner {
  readonly #inner: RateLimitStore;
  protected readonly timeoutMs: number | undefined;
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
  protected readonly late: LateAnswers;
  readonly #deadlines = new Deadlines();
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

  constructor(readonly name: string, inner: RateLimitStore, o: ResilientStoreOptions) {
    this.#inner = inner;
    this.timeoutMs = o.timeoutMs === false ? undefined : o.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    const b = o.circuitBreaker;
    const cooldownMs = b === false ? 0 : b?.cooldownMs ?? DEFAULT_COOLDOWN_MS;
    this.#breaker = b === false
      ? undefined
      : new Breaker(b?.failures ?? DEFAULT_FAILURES, cooldownMs, Math.max(b?.maxCooldownMs ?? cooldownMs, cooldownMs));
    this.#maxInFlight = o.maxInFlight ?? DEFAULT_MAX_IN_FLIGHT;
    this.#log = new StoreLog(this.name, o.logger === false ? undefined : o.logger ?? (globalThis as { console?: StoreLogger }).console);
    this.#onFailure = o.onFailure;
    this.#events = o.events;
    this.late = new LateAnswers(inner, o.events?.lateCharge);
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
      lateCharges: this.late.charges,
      lateRefunds: this.late.refunds,
      lateRefundsFailed: this.late.refundsFailed,
      lateReservations: this.late.reservations,
    };
  }

  /**
   * One guarded call. A synchronous answer passes through as it is (nothing to time out); an
   * asynchronous one races the deadline. `nowMs` is the limiter's clock (the breaker's and the
   * logs' time); `reset` passes none and gets the last time a call brought (a limiter with an
   * injected clock keeps one timeline).
   */
  protected call<T>(
    nowMs: number | undefined,
    invoke: (signal: CallSignal) => MaybePromise<T>,
    onLateAnswer: ((value: T) => void) | undefined,
  ): MaybePromise<T> {
    const call = this.open(nowMs, onLateAnswer);
    if (!(call instanceof Call)) return call;
    // The deadline counts from here: what the store's client does before its call returns (an
    // HTTP client builds its request synchronously) is part of the call.
    const startedAt = this.timeoutMs === undefined ? 0 : (call[SENT_AT] = preciseNow());
    let pending: MaybePromise<T>;
    try {
      pending = invoke(call);
    } catch (thrown) {
      return this.failed(thrown, call.atMs, call.probe, call.cold);
    }
    return this.sent(call, pending, startedAt);
  }

  /** Before a call: the bound, the breaker and a cold start let it through (its {@link Call}), or its rejection. */
  protected open<T>(nowMs: number | undefined, onLateAnswer: ((value: T) => void) | undefined): Call<T> | Promise<never> {
    const atMs = nowMs ?? this.#lastNowMs ?? Date.now();
    this.#lastNowMs = atMs;
    this.#calls++;
    this.#firstCallAtMs ??= atMs;
    // The bound first: a call refused here must not take the circuit's one probe.
    if (this.#inFlight >= this.#maxInFlight) {
      return this.#reject(inFlightFull(this.name, this.#inFlight, this.#maxInFlight));
    }
    const openMs = this.#breaker?.admit(atMs) ?? 0;
    if (openMs > 0) {
      return this.#reject(circuitOpen(this.name, openMs));
    }
    let cold = false;
    if (this.#coldSinceMs !== undefined && !this.#answered) {
      if (this.#coldProbe) {
        return this.#reject(coldWaiting(this.name));
      }
      cold = this.#coldProbe = true;
    }
    return new Call<T>(this, atMs, openMs === PROBE, cold, onLateAnswer);
  }

  /** The store's answer to a call: a synchronous one as it is, an asynchronous one raced against the deadline. */
  protected sent<T>(call: Call<T>, pending: MaybePromise<T>, startedAt: number): MaybePromise<T> {
    if (!isThenable(pending)) {
      this.#succeeded(call.atMs);
      return pending;
    }
    this.#inFlight++;
    const answer = promiseOf(call);
    if (this.timeoutMs !== undefined) this.#deadlines.add(call, startedAt, this.timeoutMs);
    pending.then(
      (value) => this.#settle(call, value),
      (thrown: unknown) => this.#settle(call, undefined, thrown, true),
    );
    return answer;
  }

  /** A call's answer (or failure: `failed`), in time or late. */
  #settle<T>(call: Call<T>, value: T | undefined, thrown?: unknown, failed?: boolean): void {
    this.#inFlight--;
    this.#deadlines.remove(call);
    if (call.done) {
      // Abandoned already, counted as its timeout. A late answer: slow, not down (later
      // timeouts are no cold start).
      if (failed === true) return;
      this.#firstAnswer(this.#lastNowMs ?? call.atMs);
      call.lateAnswer(value as T);
      return;
    }
    call.done = true;
    if (failed === true) {
      this.failed(thrown, call.atMs, call.probe, call.cold).then(undefined, call.reject);
      return;
    }
    this.#succeeded(call.atMs);
    const map = call.map;
    if (map === undefined) return call.resolve(value as T);
    let mapped: unknown;
    try {
      mapped = map(value as StoreResult, call.cost);
    } catch (error) {
      return call.reject(error);
    }
    call.resolve(mapped as T);
  }

  /** A call's deadline passed first: it is abandoned, and fails with a timeout (see {@link Deadlines}). */
  [EXPIRE](call: Call<unknown>): void {
    if (call.done) return;
    call.done = call.aborted = true;
    this.#timeouts++;
    const error = timedOut(this.name, this.timeoutMs!);
    // The deadline on the limiter's clock: the circuit opens from when the timeout was seen.
    this.failed(error, call.atMs + this.timeoutMs!, call.probe, call.cold).then(undefined, call.reject);
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
  protected failed(thrown: unknown, atMs: number, probe: boolean, cold: boolean): Promise<never> {
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
      const done = this.#inner.reconnect?.();
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
