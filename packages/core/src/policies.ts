import { ALGORITHM } from "./algorithms/algorithm.ts";
import type { Policy } from "./policy.ts";
import type { Check } from "./validation.ts";

export type { CalendarSpec, Policy, PolicyKind } from "./policy.ts";
export { tokenBucket, type TokenBucketOptions } from "./algorithms/token-bucket.ts";
export { fixedWindow } from "./algorithms/fixed-window.ts";
export { slidingWindow } from "./algorithms/sliding-window.ts";
export { slidingLog } from "./algorithms/sliding-log.ts";
export { concurrency, type ConcurrencyOptions } from "./algorithms/concurrency.ts";
export { calendarWindow, type CalendarWindowOptions } from "./algorithms/calendar-window.ts";
export type { WindowPolicyOptions } from "./algorithms/window-options.ts";

/** True when `value` is a policy built by one of the policy factories. */
export function isPolicy(value: unknown): value is Policy {
  return typeof value === "object" && value !== null && ALGORITHM in value;
}

/** What a `policy` option accepts, in words. */
export const POLICIES_ACCEPTED =
  "a policy from tokenBucket(), slidingWindow(), fixedWindow(), slidingLog(), concurrency() or calendarWindow(), or a non-empty array of them";

/** One policy, or a non-empty array of them (every slot: `every` alone would skip an array's holes). */
export const isPolicies: Check = (v) => isPolicy(v) || (Array.isArray(v) && v.length > 0 && Array.from(v).every(isPolicy));
