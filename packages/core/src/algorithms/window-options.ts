import { type Duration, DURATION_ACCEPTED, durationMs, formatDuration } from "../duration.ts";
import { FloodgateError } from "../errors.ts";
import type { Policy } from "../policy.ts";
import { type OptionSpec, type OptionSpecs, parseOptions, whole } from "../validation.ts";
import { ALGORITHM, type Algorithm } from "./algorithm.ts";

/** Keeps the window arithmetic (limit × window, in ms and µs) exact in doubles (and in Redis's Lua). */
export const MAX_LIMIT_TIMES_WINDOW = 1_125_899_906_842_624; // 2 ** 50

/** The `block` option every policy factory takes. */
export const BLOCK: OptionSpec = [
  (v) => (durationMs(v) ?? Infinity) <= MAX_BLOCK_MS,
  `${DURATION_ACCEPTED}, of at most 10 years`,
];
/** Longest `block` (and manual block): 10 years in ms. */
export const MAX_BLOCK_MS = 315_360_000_000;

export const LIMIT: OptionSpec = [/* @__PURE__ */ whole(1), "a whole number >= 1", 1];
export const NAME: OptionSpec = [
  (v) => typeof v === "string" && /^[A-Za-z0-9._:/-]{1,64}$/.test(v),
  "1 to 64 characters from A-Z a-z 0-9 . _ : / -",
];

const WINDOW_POLICY_OPTIONS: OptionSpecs = {
  limit: LIMIT,
  window: [(v) => durationMs(v) !== undefined, DURATION_ACCEPTED, 1],
  name: NAME,
  block: BLOCK,
};

/** Options of the window policies. */
export interface WindowPolicyOptions {
  /** Requests (cost units) admitted per window. */
  limit: number;
  /** Window length: milliseconds or a string such as `"10s"`, `"1m"`. */
  window: Duration;
  /** Policy name; default `"<limit>-per-<window>"`, e.g. `"100-per-1m"`. */
  name?: string;
  /**
   * Once this policy denies a request, keep the key denied for this long (milliseconds or a
   * string such as `"1h"`), whatever the window says: brute-force protection. Default: no block.
   */
  block?: Duration;
}

/** Validates the options of a window kind and builds its policy. */
export function windowPolicy(kind: Policy["kind"], algorithm: Algorithm, where: string, options: WindowPolicyOptions): Policy {
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
    blockMs: o.block === undefined ? 0 : durationMs(o.block)!,
    [ALGORITHM]: algorithm,
  });
}

/** The options of a window policy admitting `limit` per `windowMs`, named `name` when given. */
export const windowExample = (limit: number, windowMs: number, name?: string): WindowPolicyOptions =>
  name === undefined ? { limit, window: windowMs } : { limit, window: windowMs, name };
