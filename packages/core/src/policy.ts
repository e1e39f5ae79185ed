/*
 * What a policy is, as plain types: the module every other one may import, importing nothing.
 */

/**
 * The kinds of policy Floodgate implements. The registry (algorithms/registry.ts) has exactly
 * one definition per kind: the compiler refuses it otherwise.
 */
export type PolicyKind = "token-bucket" | "fixed-window" | "sliding-window" | "sliding-log" | "concurrency";

/**
 * A validated, immutable rate-limit policy. Build one with {@link tokenBucket},
 * {@link slidingWindow}, {@link fixedWindow}, {@link slidingLog} or {@link concurrency}.
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
}
