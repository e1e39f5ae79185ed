import type { FloodgateError } from "../../errors.ts";
import { isFunction, objectOf, type OptionSpecs, whole } from "../../validation.ts";
import type { RateLimitStore } from "../store.ts";

// The public options, counters and defaults of the resilient store (../resilient-store.ts).

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
  /** Told when the circuit opens and recovers, and when a late charge is given back: for metrics. */
  events?: StoreEvents;
}

/**
 * What a resilient store tells an observer (metrics, traces, alerts), each as it happens. Every
 * member is optional; one that throws is ignored. `store` is the store's name (`"redis"`...).
 */
export interface StoreEvents {
  /** A call failed: the store's error, a timeout, or a call not sent (`STORE_UNAVAILABLE`). */
  failure?(store: string, error: FloodgateError): void;
  /** The circuit opened (or reopened after a failed probe) for `cooldownMs`: calls fail at once until a probe. */
  circuitOpened?(store: string, cooldownMs: number): void;
  /** A probe succeeded after the circuit had opened: the store is called again. `openMs`: since it first opened. */
  circuitClosed?(store: string, openMs: number): void;
  /**
   * A call abandoned at its deadline was admitted by the store afterwards, and what it charged
   * was given back (`returned` true) or could not be (`false`: it stays charged).
   */
  lateCharge?(store: string, returned: boolean): void;
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

export const DEFAULT_TIMEOUT_MS = 1000;
export const DEFAULT_FAILURES = 5;
export const DEFAULT_COOLDOWN_MS = 1000;
export const DEFAULT_MAX_IN_FLIGHT = 1000;
/**
 * Before the store's first answer, a timeout is a cold start (connecting, loading scripts) more
 * often than a fault: for this long after the first call it does not count against the breaker.
 */
export const WARM_UP_MS = 10_000;

/** Ms with sub-ms precision where the runtime has `performance` (every current one), else `Date.now()`. */
export const preciseNow: () => number = typeof globalThis.performance?.now === "function"
  ? () => globalThis.performance.now()
  : () => Date.now();

export const OPTIONS: OptionSpecs = {
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
  events: [
    (v) => typeof v === "object" && v !== null && Object.values(v).every((f) => f === undefined || typeof f === "function"),
    "an object of optional functions { failure, circuitOpened, circuitClosed, lateCharge }",
  ],
};

/** Tells an observer of {@link StoreEvents}; its bug must not change the call's outcome. */
export function tell(event: () => void): void {
  try {
    event();
  } catch {
    // ignored, as `onFailure`'s
  }
}
