import { ALGORITHM } from "./algorithms/algorithm.ts";
import type { PolicyKind } from "./algorithms/registry.ts";
import type { Check } from "./validation.ts";

export type { PolicyKind } from "./algorithms/registry.ts";
export { tokenBucket, type TokenBucketOptions } from "./algorithms/token-bucket.ts";
export { fixedWindow } from "./algorithms/fixed-window.ts";
export { slidingWindow } from "./algorithms/sliding-window.ts";
export { slidingLog } from "./algorithms/sliding-log.ts";
export { concurrency, type ConcurrencyOptions } from "./algorithms/concurrency.ts";
export type { WindowPolicyOptions } from "./algorithms/window-options.ts";

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

/** True when `value` is a policy built by one of the policy factories. */
export function isPolicy(value: unknown): value is Policy {
  return typeof value === "object" && value !== null && ALGORITHM in value;
}

/** What a `policy` option accepts, in words. */
export const POLICIES_ACCEPTED =
  "a policy from tokenBucket(), slidingWindow(), fixedWindow(), slidingLog() or concurrency(), or a non-empty array of them";

/** One policy, or a non-empty array of them (every slot: `every` alone would skip an array's holes). */
export const isPolicies: Check = (v) => isPolicy(v) || (Array.isArray(v) && v.length > 0 && Array.from(v).every(isPolicy));
