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
    if (s[o] === mark) s[o + 1] = Math.min(s[o + 1]! + cost, Number.MAX_SAFE_INTEGER);
    else if (s[o] === mark + 1) s[o + 2] = Math.min(s[o + 2]! + cost, Number.MAX_SAFE_INTEGER);
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

/**
 * Sliding-window counter in Lua. Parameter: window ms. Read: index, cur, prev, v (the raw GET:
 * false when absent) and d = whether the stored state is that window's.
 */
const SW_READ = `local index, cur, prev, v = floor(now / (P * 1000)), 0, 0, redis.pcall("GET", k)
d = false
if type(v) == "string" then
  local si, sc, sp = string.match(v, "^(-?%d+):(%d+):(%d+)$")
  if si then
    si = si + 0
    if si > index then index = si end
    if si == index then cur, prev, d = sc + 0, sp + 0, true
    elseif si == index - 1 then prev = sc + 0 end
  end
end
`;

/** Rewrites the charged window's count (`sc`) or, one window later, the previous count (`sp`). */
const SW_INTO_MARK = (current: string, previous: string): string =>
  `local v = redis.pcall("GET", k)
if type(v) == "string" then
  local si, sc, sp = string.match(v, "^(-?%d+):(%d+):(%d+)$")
  if si then
    si, sc, sp = si + 0, sc + 0, sp + 0
    if si == m then redis.call("SET", k, fmt("%d:%d:%d", si, ${current}, sp), "KEEPTTL")
    elseif si == m + 1 then redis.call("SET", k, fmt("%d:%d:%d", si, sc, ${previous}), "KEEPTTL") end
  end
end
`;

/** Redis state: the string "index:current:previous". */
const SLIDING_WINDOW_LUA: LuaAlgorithm = /* @__PURE__ */ (() => ({
  code: "s",
  parameter: (p: Policy) => p.windowMs,
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
`,
    // Same window: the key already expires when both counted windows have passed.
    commit: `b = b + cost
local v = fmt("%d:%d:%d", a, b, c)
if d then redis.call("SET", k, v, "KEEPTTL")
else redis.call("SET", k, v, "PX", fmt("%d", max(1, ceil(((a * P + 2 * P) * 1000 - now) / 1000)))) end
out[i + 1], out[i + 2], out[j] = max(0, floor((e - b * P) / P)), a * P + 2 * P, a
`,
    settle: settleFragment(
      SW_INTO_MARK("max(0, sc - cost)", "max(0, sp - cost)"),
      SW_INTO_MARK("math.min(sc + cost, 9007199254740991)", "math.min(sp + cost, 9007199254740991)"),
    ),
    // Into the mark: the stored window's own count, or its previous count one window later.
    refund: `if m then
  local v = redis.pcall("GET", k)
  if type(v) == "string" then
    local si, sc, sp = string.match(v, "^(-?%d+):(%d+):(%d+)$")
    if si then
      si, sc, sp = si + 0, sc + 0, sp + 0
      if si == m then redis.call("SET", k, fmt("%d:%d:%d", si, max(0, sc - cost), sp), "KEEPTTL")
      elseif si == m + 1 then redis.call("SET", k, fmt("%d:%d:%d", si, sc, max(0, sp - cost)), "KEEPTTL") end
    end
  end
else
${SW_READ}if v then
  local f = math.min(cur, cost)
  redis.call("SET", k, fmt("%d:%d:%d", index, cur - f, max(0, prev - (cost - f))), "PX", fmt("%d", max(1, ceil(((index + 2) * P * 1000 - now) / 1000))))
end
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
