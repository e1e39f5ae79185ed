import { DURATION_ACCEPTED, durationMs, formatDuration, type Duration } from "./duration.ts";
import { ALGORITHM, FIXED_WINDOW, SLIDING_LOG, SLIDING_WINDOW, TOKEN_BUCKET, type Algorithm } from "./algorithms.ts";
import { FloodgateError } from "./errors.ts";
import { parseOptions, whole, type Check, type OptionSpec, type OptionSpecs } from "./validation.ts";

/** The four algorithms Floodgate implements. */
export type PolicyKind = "token-bucket" | "sliding-window" | "fixed-window" | "sliding-log";

/**
 * A validated, immutable rate-limit policy. Build one with {@link tokenBucket},
 * {@link slidingWindow}, {@link fixedWindow} or {@link slidingLog}.
 */
export interface Policy {
  readonly kind: PolicyKind;
  /** Unique within a limiter; appears in `Decision.policy` and in the IETF `RateLimit` headers. */
  readonly name: string;
  /** Requests (or cost units) allowed: the window's limit, or the bucket's capacity. */
  readonly limit: number;
  /** Window length in ms; for a token bucket, the time to refill from empty to full. */
  readonly windowMs: number;
  /** Token bucket only: tokens added per second. 0 for the window algorithms. */
  readonly refillRate: number;
  /**
   * Token bucket only: ms to earn one token, `1000 / refillRate` rounded to whole microseconds
   * (so the state is an exact integer everywhere). 0 for the window algorithms.
   */
  readonly intervalMs: number;
}

/** Keeps the sliding-window arithmetic exact in doubles (and in Redis's Lua). */
const MAX_LIMIT_TIMES_WINDOW = 1_125_899_906_842_624; // 2 ** 50, a literal so that bundles without it drop it
/**
 * Most µs a token bucket takes to refill from empty (capacity × µs per token, ~71 years): keeps
 * the arrival time, now + up to twice that, an exact integer in doubles (and in Redis's Lua).
 */
const MAX_BUCKET_US = 2_251_799_813_685_248; // 2 ** 51, a literal so that bundles without it drop it

const LIMIT: OptionSpec = [/* @__PURE__ */ whole(1), "a whole number >= 1", 1];
const NAME: OptionSpec = [(v) => typeof v === "string" && /^[A-Za-z0-9._:/-]{1,64}$/.test(v), "1 to 64 characters from A-Z a-z 0-9 . _ : / -"];
const TOKEN_BUCKET_OPTIONS: OptionSpecs = {
  capacity: LIMIT,
  refillRate: [(v) => typeof v === "number" && v > 0 && v <= 1_000_000, "tokens per second: a finite number > 0 and <= 1000000", 1],
  name: NAME,
};
const WINDOW_POLICY_OPTIONS: OptionSpecs = {
  limit: LIMIT,
  window: [(v) => durationMs(v) !== undefined, DURATION_ACCEPTED, 1],
  name: NAME,
};

/** Options of {@link tokenBucket}. */
export interface TokenBucketOptions {
  /** Maximum tokens the bucket holds: the largest burst admitted at once. */
  capacity: number;
  /** Tokens added per second, continuously (fractions allowed: `100 / 60` is 100 per minute). */
  refillRate: number;
  /** Policy name; default `"<capacity>-burst-<refillRate>-per-s"`. */
  name?: string;
}

/** Options of the window policies. */
export interface WindowPolicyOptions {
  /** Requests (cost units) admitted per window. */
  limit: number;
  /** Window length: milliseconds or a string such as `"10s"`, `"1m"`. */
  window: Duration;
  /** Policy name; default `"<limit>-per-<window>"`, e.g. `"100-per-1m"`. */
  name?: string;
}

/**
 * A token bucket of `capacity` tokens refilled continuously at `refillRate` tokens per second
 * (stored as one theoretical-arrival time, GCRA-style). Admits bursts up to `capacity`, then
 * `refillRate` per second. `resetAt` is when the bucket is full again.
 *
 * @example
 * const burst = tokenBucket({ capacity: 100, refillRate: 10 }); // 100 at once, then 10/s
 */
export function tokenBucket(options: TokenBucketOptions): Policy {
  const o = parseOptions<TokenBucketOptions>(options, "tokenBucket()", TOKEN_BUCKET_OPTIONS);
  const intervalUs = Math.max(1, Math.round(1_000_000 / o.refillRate));
  if (o.capacity * intervalUs > MAX_BUCKET_US) {
    throw new FloodgateError(
      "INVALID_OPTION",
      `tokenBucket(): \`capacity\` / \`refillRate\` is too large (${o.capacity} tokens at ${o.refillRate} per second); expected the time to refill from empty, capacity × ${intervalUs} µs per token, <= ${MAX_BUCKET_US} µs (about 71 years).`,
    );
  }
  const intervalMs = intervalUs / 1000;
  return Object.freeze({
    kind: "token-bucket" as const,
    name: o.name ?? `${o.capacity}-burst-${+o.refillRate.toFixed(6)}-per-s`,
    limit: o.capacity,
    windowMs: (o.capacity * intervalUs) / 1000,
    refillRate: o.refillRate,
    intervalMs,
    [ALGORITHM]: TOKEN_BUCKET,
  });
}

/**
 * A sliding-window counter: the current fixed window's count plus the previous window's count
 * weighted by how much of it still overlaps the sliding window. Three numbers per key; admits at
 * most `limit` per aligned window and fewer than `2 × limit` in any window-long interval.
 * `resetAt` is when both counted windows have passed.
 *
 * @example
 * const perMinute = slidingWindow({ limit: 100, window: "1m" });
 */
export function slidingWindow(options: WindowPolicyOptions): Policy {
  return windowPolicy("sliding-window", SLIDING_WINDOW, "slidingWindow()", options);
}

/**
 * A fixed window: windows aligned to multiples of `window` since the Unix epoch, each admitting
 * `limit`. Cheapest, but admits up to `2 × limit` across a window boundary. `resetAt` is the
 * end of the current window.
 *
 * @example
 * const daily = fixedWindow({ limit: 1000, window: "1d" });
 */
export function fixedWindow(options: WindowPolicyOptions): Policy {
  return windowPolicy("fixed-window", FIXED_WINDOW, "fixedWindow()", options);
}

/**
 * A sliding log: one timestamp per admitted request (per cost unit); exact — never more than
 * `limit` in any window-long interval — at a memory cost proportional to `limit`. `resetAt` is
 * when the newest logged request leaves the window.
 *
 * @example
 * const login = slidingLog({ limit: 5, window: "1m" });
 */
export function slidingLog(options: WindowPolicyOptions): Policy {
  return windowPolicy("sliding-log", SLIDING_LOG, "slidingLog()", options);
}

function windowPolicy(kind: PolicyKind, algorithm: Algorithm, where: string, options: WindowPolicyOptions): Policy {
  const o = parseOptions<WindowPolicyOptions>(options, where, WINDOW_POLICY_OPTIONS);
  const windowMs = durationMs(o.window)!;
  if (o.limit * windowMs > MAX_LIMIT_TIMES_WINDOW) {
    throw new FloodgateError(
      "INVALID_OPTION",
      `${where}: \`limit\` × \`window\` is too large (${o.limit} × ${windowMs} ms); expected limit × window in ms <= ${MAX_LIMIT_TIMES_WINDOW}.`,
    );
  }
  return Object.freeze({
    kind,
    name: o.name ?? `${o.limit}-per-${formatDuration(windowMs)}`,
    limit: o.limit,
    windowMs,
    refillRate: 0,
    intervalMs: 0,
    [ALGORITHM]: algorithm,
  });
}

/** True when `value` is a policy built by one of the policy factories. */
export function isPolicy(value: unknown): value is Policy {
  return typeof value === "object" && value !== null && ALGORITHM in value;
}

/** What a `policy` option accepts, in words. */
export const POLICIES_ACCEPTED = "a policy from tokenBucket(), slidingWindow(), fixedWindow() or slidingLog(), or a non-empty array of them";

/** One policy, or a non-empty array of them. */
export const isPolicies: Check = (v) => isPolicy(v) || (Array.isArray(v) && v.length > 0 && v.every(isPolicy));
