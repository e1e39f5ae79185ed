import { isRecord, type OptionSpec } from "../validation.ts";

/*
 * The `warnAt` option, as createRateLimiter() and the HTTP options check it.
 */

/** What `warnAt` accepts, in words. */
export const WARN_AT_ACCEPTED =
  "a fraction of the limit used, greater than 0 and at most 1 (0.8: warn when 80% is used), or an object mapping policy names to such fractions";

const isFraction = (v: unknown): boolean => typeof v === "number" && v > 0 && v <= 1;

/** The `warnAt` option of createRateLimiter() and of the HTTP options. */
export const WARN_AT: OptionSpec = [
  (v) => isFraction(v) || (isRecord(v) === true && Object.values(v as object).every(isFraction)),
  WARN_AT_ACCEPTED,
];
