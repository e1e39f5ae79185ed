/*
 * What a policy is, as plain types: the module every other one may import, importing nothing.
 */

/**
 * The kinds of policy Floodgate implements. The registry (algorithms/registry.ts) has exactly
 * one definition per kind: the compiler refuses it otherwise.
 */
export type PolicyKind = "token-bucket" | "fixed-window" | "sliding-window" | "sliding-log" | "concurrency" | "calendar-window";

/** The calendar a `calendarWindow()` policy counts in: its period, time zone and anchor. */
export interface CalendarSpec {
  /** `"day"`, `"week"` or `"month"`: local days, weeks or months (billing cycles). */
  readonly period: "day" | "week" | "month";
  /** An IANA time zone, e.g. `"Europe/Berlin"`. */
  readonly timeZone: string;
  /** Months: the day of the month a cycle starts, 1 to 31 (clamped to a shorter month's last day); 1 otherwise. */
  readonly billingDay: number;
  /** Weeks: the day a week starts, 0 (Sunday) to 6 (Saturday); 1 otherwise. */
  readonly weekStart: number;
}

/**
 * A validated, immutable rate-limit policy. Build one with {@link tokenBucket},
 * {@link slidingWindow}, {@link fixedWindow}, {@link slidingLog}, {@link concurrency} or {@link calendarWindow}.
 */
export interface Policy {
  /** The algorithm: `"token-bucket"`, `"sliding-window"`, `"fixed-window"`, `"sliding-log"` or `"concurrency"`. */
  readonly kind: PolicyKind;
  /** Unique within a limiter; appears in `Decision.policy` and in the IETF `RateLimit` headers. */
  readonly name: string;
  /** Requests (or cost units) allowed: the window's limit, or the bucket's capacity. */
  readonly limit: number;
  /** Window length in ms; for a token bucket, the time to refill from empty to full; for a concurrency limit, its timeout. */
  readonly windowMs: number;
  /** Token bucket only: tokens added per second. 0 for the window algorithms. */
  readonly refillRate: number;
  /**
   * Token bucket only: ms to earn one token, `1000 / refillRate` rounded to whole microseconds
   * (so the state is an exact integer everywhere). 0 for the window algorithms.
   */
  readonly intervalMs: number;
  /**
   * The `block` option in ms, 0 without one: once this policy denies a request, the key stays
   * denied (every policy of the limiter) for this long, whatever the algorithm says.
   */
  readonly blockMs: number;
  /** Calendar window only: the calendar it counts in; absent for every other kind. */
  readonly calendar?: CalendarSpec;
}
