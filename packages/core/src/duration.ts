import { describeValue, FloodgateError } from "./errors.ts";

/** A duration in milliseconds, or a string such as `"500ms"`, `"10s"`, `"1m"`, `"1h"`, `"1d"`. */
export type Duration = number | `${number}${DurationUnit}` | `${number} ${DurationUnit}`;
type DurationUnit = "ms" | "s" | "m" | "h" | "d";

const UNIT_MS: Record<DurationUnit, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const DURATION_PATTERN = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)\s*$/;
/** What a duration option accepts, in words. */
export const DURATION_ACCEPTED = 'a whole number of milliseconds >= 1, or a string like "500ms", "10s", "1m", "1h", "1d"';

/** A {@link Duration} in whole milliseconds (>= 1), or `undefined` when `value` is not one. */
export function durationMs(value: unknown): number | undefined {
  let ms: number | undefined;
  if (typeof value === "number") ms = value;
  else if (typeof value === "string") {
    const match = DURATION_PATTERN.exec(value);
    if (match) ms = Number(match[1]) * UNIT_MS[match[2] as DurationUnit];
  }
  return ms !== undefined && Number.isInteger(ms) && ms >= 1 ? ms : undefined;
}

/**
 * Parses a {@link Duration} into whole milliseconds, or throws a `FloodgateError` naming `option`.
 */
export function parseDuration(value: unknown, option = "window"): number {
  const ms = durationMs(value);
  if (ms === undefined) {
    throw new FloodgateError(
      "INVALID_OPTION",
      `Invalid option \`${option}\`: received ${describeValue(value)}; expected ${DURATION_ACCEPTED}.`,
    );
  }
  return ms;
}

/** Formats milliseconds compactly (`60000` → `"1m"`), used for default policy names. */
export function formatDuration(ms: number): string {
  for (const unit of ["d", "h", "m", "s"] as const) {
    if (ms % UNIT_MS[unit] === 0) return `${ms / UNIT_MS[unit]}${unit}`;
  }
  return `${ms}ms`;
}
