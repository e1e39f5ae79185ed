import type { Policy } from "../policy.ts";
import {
  type Algorithm,
  type AlgorithmDefinition,
  ceilMs,
  type LuaAlgorithm,
  NEVER,
  settleByDifference,
  settleFragment,
  WINDOW_TRAITS,
} from "./algorithm.ts";
import { windowExample, windowPolicy, type WindowPolicyOptions } from "./window-options.ts";
import { BLOCK_EXPIRY, BLOCK_OVER, FLAG, FLAG_VALUE, keptExpiry } from "./block-flag.ts";
import { answer, closeStep, openStep, readStep } from "./first-step.ts";

/**
 * Most a count reaches through a settlement's overcharge: 2^52 − 1, below the Redis state's block
 * flag (block-flag.ts).
 */
const MAX_COUNT = 4_503_599_627_370_495;

const refundSliding: Algorithm["refund"] = (p, s, o, _log, now, cost, mark) => {
  const w = p.windowMs;
  if (mark !== undefined) {
    if (s[o] === mark) s[o + 1] = Math.max(0, s[o + 1]! - cost);
    else if (s[o] === mark + 1) s[o + 2] = Math.max(0, s[o + 2]! - cost);
    return (s[o]! + 2) * w * 1000;
  }
  const index = Math.max(Math.floor(now / (w * 1000)), s[o]!);
  const cur = currentCount(s, o, index);
  const prev = previousCount(s, o, index);
  const fromCurrent = Math.min(cur, cost);
  s[o] = index;
  s[o + 1] = cur - fromCurrent;
  s[o + 2] = Math.max(0, prev - (cost - fromCurrent));
  return (index + 2) * w * 1000;
};

/**
 * Sliding-window counter: [window index, current count, previous count]. The previous window
 * counts in proportion to its overlap with the sliding window, in whole milliseconds, compared
 * in integers: prev × (W − elapsed) + (cur + cost) × W ≤ limit × W.
 */
export const SLIDING_WINDOW: Algorithm = {
  traits: WINDOW_TRAITS,
  width: 3,
  keepsLog: false,
  apply(p, s, o, _log, now, cost, out, i, charge) {
    const w = p.windowMs;
    const limit = p.limit;
    const index = Math.max(Math.floor(now / (w * 1000)), s[o]!);
    const cur = currentCount(s, o, index);
    const prev = previousCount(s, o, index);
    const start = index * w;
    const elapsed = Math.max(0, Math.floor((now - start * 1000) / 1000));
    const budget = limit * w - prev * (w - elapsed);
    if ((cur + cost) * w <= budget) {
      out[i] = 1;
      out[i + 3] = 0;
      if (charge) {
        s[o] = index;
        s[o + 1] = cur + cost;
        s[o + 2] = prev;
        out[i + 1] = Math.max(0, Math.floor((budget - (cur + cost) * w) / w));
        out[i + 2] = start + 2 * w;
        return (start + 2 * w) * 1000;
      }
    } else {
      out[i] = 0;
      out[i + 3] = cost > limit ? NEVER : slidingRetryMs(limit, w, start, cur, prev, cost, now);
    }
    out[i + 1] = Math.max(0, Math.floor((budget - cur * w) / w));
    out[i + 2] = cur > 0 ? start + 2 * w : prev > 0 ? start + w : ceilMs(now);
    return (start + 2 * w) * 1000;
  },
  // The mark is the window index charged. While it is stored, its count is the current one;
  // once the next window is stored, it is the previous one; either includes the request's cost,
  // so taking `cost` from it never goes below the counts without the request. Any later window
  // no longer weighs the charged one: nothing to give back.
  refund: refundSliding,
  // An overcharge goes where a refund into the mark would come from: the charged window's count,
  // as the current or the previous one; nothing once a later window no longer weighs it.
  settle: /* @__PURE__ */ settleByDifference(refundSliding, (p, s, o, _log, _now, cost, mark) => {
    if (s[o] === mark) s[o + 1] = Math.min(s[o + 1]! + cost, MAX_COUNT);
    else if (s[o] === mark + 1) s[o + 2] = Math.min(s[o + 2]! + cost, MAX_COUNT);
    return (s[o]! + 2) * p.windowMs * 1000;
  }),
  accepts: (s, o) =>
    Number.isSafeInteger(s[o]) && Number.isSafeInteger(s[o + 1]) && Number.isSafeInteger(s[o + 2]) && s[o + 1]! >= 0 && s[o + 2]! >= 0,
};

/** The current window's count once the state is rolled forward to window `index`. */
function currentCount(s: Float64Array, o: number, index: number): number {
  return s[o] === index ? s[o + 1]! : 0;
}

/** The previous window's count once the state is rolled forward to window `index`. */
function previousCount(s: Float64Array, o: number, index: number): number {
  if (s[o] === index) return s[o + 2]!;
  if (s[o] === index - 1) return s[o + 1]!;
  return 0;
}

/** The earliest whole millisecond at which `cost` fits, given the estimate's shape. */
function slidingRetryMs(limit: number, w: number, start: number, cur: number, prev: number, cost: number, nowUs: number): number {
  let at: number;
  if (cur + cost <= limit) {
    // Later in this window, once enough of the previous window has slid out.
    let e = Math.max(0, Math.ceil(w - ((limit - cur - cost) * w) / prev));
    while (prev * (w - e) + (cur + cost) * w > limit * w) e++;
    at = start + e;
  } else {
    // In the next window, where the current count becomes the weighted previous one.
    let e = Math.max(0, Math.ceil(w - ((limit - cost) * w) / cur));
    while (cur * (w - e) + cost * w > limit * w) e++;
    at = start + w + e;
  }
  return Math.max(1, Math.ceil(at - nowUs / 1000));
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

/** A state string of this kind: index, current count (plus the block flag), previous count. */
const SW_STATE = "^(-?%d+):(%d+):(%d+)$";

/**
 * Sliding-window counter in Lua. Parameter: window ms. Read: index, cur, prev, v (the raw GET:
 * false when absent), fl (the block flag the current count carried, 2^52 or 0; see
 * block-flag.ts) and d = whether the stored state is that window's.
 */
const SW_READ = /* @__PURE__ */ (() =>
  `local index, cur, prev, v, fl = floor(now / (P * 1000)), 0, 0, redis.pcall("GET", k), 0
d = false
if type(v) == "string" then
  local si, sc, sp = string.match(v, "${SW_STATE}")
  if si then
    si, sc = si + 0, sc + 0
    if sc >= ${FLAG} then sc, fl = sc - ${FLAG}, ${FLAG} end
    if si > index then index = si end
    if si == index then cur, prev, d = sc, sp + 0, true
    elseif si == index - 1 then prev = sc end
  end
end
`)();

/**
 * Writes the state of the counts \`n\` (index, current, previous; the flag \`fl\` added to the
 * current): keeping the expiry when \`same\` (the stored window's), else with the expiry of window
 * \`w\` (the end of the window after it: its count still weighs on the next), no earlier than a
 * flagged state's.
 */
const swWrite = (index: string, cur: string, prev: string, same: string, w: string): string => {
  const ms = `max(1, ceil(((${w} + 2) * P * 1000 - now) / 1000))`;
  const v = `fmt("%d:%d:%d", ${index}, ${cur} + fl, ${prev})`;
  return `if ${same} then redis.call("SET", k, ${v}, "KEEPTTL")
elseif fl > 0 then redis.call("SET", k, ${v}, "PX", fmt("%d", ${keptExpiry(ms)}))
else redis.call("SET", k, ${v}, "PX", fmt("%d", ${ms})) end
`;
};

/**
 * Rewrites the charged window's count (\`sc\`) or, one window later, the previous count (\`sp\`),
 * keeping the flag (\`fl\`) and the expiry.
 */
const SW_INTO_MARK = (current: string, previous: string): string =>
  `local v = redis.pcall("GET", k)
if type(v) == "string" then
  local si, sc, sp = string.match(v, "${SW_STATE}")
  if si then
    local fl = 0
    si, sc, sp = si + 0, sc + 0, sp + 0
    if sc >= ${FLAG} then sc, fl = sc - ${FLAG}, ${FLAG} end
    if si == m then redis.call("SET", k, fmt("%d:%d:%d", si, ${current} + fl, sp), "KEEPTTL")
    elseif si == m + 1 then redis.call("SET", k, fmt("%d:%d:%d", si, sc + fl, ${previous}), "KEEPTTL") end
  end
end
`;

/**
 * The single-policy script's first step for a charge: one \`GET\` and, when admitted, one
 * \`SET\`, no read of the block key unless the state is flagged (see block-flag.ts). It decides a
 * missing state or one of this window or an earlier one, unflagged or with its block over, and
 * answers the state it read and the clock (first-step.ts), which {@link expandSliding} reads as
 * the usual result. Anything else (a block, a clock behind the stored window, another kind's
 * state) falls through to the general path. \`one\`: the script for a charge of 1 on the server's
 * clock, whose ARGV are only the limit and the window.
 */
const swFast = (one: boolean): string => {
  const [L, P, cost] = one ? ["ARGV[1]", "ARGV[2]", "1"] : ["ARGV[2]", "ARGV[3]", "cost"];
  return `${openStep(one)}local v = redis.pcall("GET", KEYS[1])
local P, index, si, sc, sp, ti = ${P} + 0, nil
if type(v) == "string" then si, sc, sp = string.match(v, "${SW_STATE}") end
if si then
ti, si, sc = si, si + 0, sc + 0
if sc >= ${FLAG} and ${BLOCK_OVER} then sc = sc - ${FLAG} end
if sc < ${FLAG} then index = now / (P * 1000) index = index - index % 1 end
elseif v == false then index = now / (P * 1000) index = index - index % 1 end
if index then
local cur, prev, same = 0, 0, false
if si == index then cur, prev, same = sc, sp + 0, true elseif si == index - 1 then prev = sc elseif si and si > index then index = nil end
if index then
local e = (now - index * P * 1000) / 1000
local n = cur + ${cost}
if n * P <= ${L} * P - prev * (P - e + e % 1) then
if same and n < 1e14 then redis.call("SET", KEYS[1], ti .. ":" .. n .. ":" .. sp, "KEEPTTL")
elseif same then redis.call("SET", KEYS[1], string.format("%d:%d:%d", index, n, prev), "KEEPTTL")
else redis.call("SET", KEYS[1], string.format("%d:%d:%d", index, n, prev), "PX", string.format("%d", math.ceil(((index + 2) * P * 1000 - now) / 1000))) end
end
${answer('(v or "")')}
end
end
${closeStep(one)}`;
};

/**
 * The first step's answer as the script's usual result of a charge of \`cost\`: the same decision
 * and figures, by the same double arithmetic, as \`apply\`'s. A flagged state's count is read
 * without its flag (the step answers only for a state unflagged or with its block over).
 */
function expandSliding(reply: unknown, cost: number, limit: number, w: number): number[] | undefined {
  const step = readStep(reply);
  if (step === undefined) return undefined;
  const { now } = step;
  const index = Math.floor(now / (w * 1000));
  let cur = 0;
  let prev = 0;
  if (step.state !== "") {
    const m = /^(-?\d+):(\d+):(\d+)$/.exec(step.state);
    if (m === null) return undefined;
    const stored = Number(m[1]);
    const count = Number(m[2]) % FLAG_VALUE;
    if (stored === index) (cur = count, prev = Number(m[3]));
    else if (stored === index - 1) prev = count;
  }
  const start = index * w;
  const budget = limit * w - prev * (w - Math.floor((now - start * 1000) / 1000));
  if ((cur + cost) * w <= budget) return [1, 1, Math.max(0, Math.floor((budget - (cur + cost) * w) / w)), start + 2 * w, 0, index];
  return [
    0,
    0,
    Math.max(0, Math.floor((budget - cur * w) / w)),
    cur > 0 ? start + 2 * w : prev > 0 ? start + w : ceilMs(now),
    cost > limit ? NEVER : slidingRetryMs(limit, w, start, cur, prev, cost, now),
  ];
}

/**
 * Flags the state in \`k\` as blocked (see block-flag.ts): its current count 2^52 higher (a
 * missing or unreadable state as an empty one of window 0), to live at least until the block ends.
 */
const SW_BLOCK_MARK = /* @__PURE__ */ (() =>
  `local fv, fi, fc, fp = redis.pcall("GET", k), 0, 0, 0
if type(fv) == "string" then
  local si, sc, sp = string.match(fv, "${SW_STATE}")
  if si then fi, fc, fp = si + 0, sc + 0, sp + 0 end
end
if fc < ${FLAG} then fc = fc + ${FLAG} end
redis.call("SET", k, fmt("%d:%d:%d", fi, fc, fp), "PX", fmt("%d", ${BLOCK_EXPIRY}))
`)();

/** Redis state: the string "index:current:previous", the current count plus 2^52 while flagged. */
const SLIDING_WINDOW_LUA: LuaAlgorithm = /* @__PURE__ */ (() => ({
  code: "s",
  parameter: (p: Policy) => p.windowMs,
  // A count stays below the block flag.
  maxLimit: MAX_COUNT,
  fast: { source: swFast, expand: expandSliding },
  blockMark: SW_BLOCK_MARK,
  flag: { read: "d >= 2", clear: "d = d % 2" },
  fragments: {
    eval: `${SW_READ}local start = index * P
local elapsed = floor((now - start * 1000) / 1000)
if elapsed < 0 then elapsed = 0 end
local budget = L * P - prev * (P - elapsed)
ok = (cur + cost) * P <= budget
out[i], out[i + 1] = ok and 1 or 0, max(0, floor((budget - cur * P) / P))
if cur > 0 then out[i + 2] = start + 2 * P elseif prev > 0 then out[i + 2] = start + P else out[i + 2] = ceil(now / 1000) end
if ok then out[i + 3] = 0 elseif cost > L then out[i + 3] = -1 else
  local at, x
  if cur + cost <= L then
    x = max(0, ceil(P - ((L - cur - cost) * P) / prev))
    while prev * (P - x) + (cur + cost) * P > L * P do x = x + 1 end
    at = start + x
  else
    x = max(0, ceil(P - ((L - cost) * P) / cur))
    while cur * (P - x) + cost * P > L * P do x = x + 1 end
    at = start + P + x
  end
  out[i + 3] = max(1, ceil(at - now / 1000))
end
a, b, c, e = index, cur, prev, budget
d = (d and 1 or 0) + (fl > 0 and 2 or 0)
`,
    // d: 1 when the stored window is this one (the key already expires when both counted windows
    // have passed), plus 2 when flagged (the flag and its expiry are kept).
    commit: `b = b + cost
local fl = d >= 2 and ${FLAG} or 0
${swWrite("a", "b", "c", "d % 2 == 1", "a")}out[i + 1], out[i + 2], out[j] = max(0, floor((e - b * P) / P)), a * P + 2 * P, a
`,
    settle: settleFragment(
      SW_INTO_MARK("max(0, sc - cost)", "max(0, sp - cost)"),
      SW_INTO_MARK(`math.min(sc + cost, ${MAX_COUNT})`, `math.min(sp + cost, ${MAX_COUNT})`),
    ),
    // Into the mark: the stored window's own count, or its previous count one window later.
    refund: `if m then
${SW_INTO_MARK("max(0, sc - cost)", "max(0, sp - cost)")}else
${SW_READ}if v then
  local f = math.min(cur, cost)
  ${swWrite("index", "cur - f", "max(0, prev - (cost - f))", "false", "index")}end
end
`,
  },
}))();

export const SLIDING_WINDOW_DEFINITION: AlgorithmDefinition<"sliding-window"> = {
  traits: WINDOW_TRAITS,
  kind: "sliding-window",
  factoryName: "slidingWindow",
  lua: SLIDING_WINDOW_LUA,
  docs: {
    call: "slidingWindow({ limit, window })",
    statePerKey: "three numbers",
    guarantee: "at most `limit` per aligned window, fewer than `2 × limit` in any window-long interval",
    resetAt: "when both counted windows have passed",
  },
  exampleOptions: windowExample,
  // The current window's count still weighs on the next one.
  retentionMs: (p) => 2 * p.windowMs,
};
