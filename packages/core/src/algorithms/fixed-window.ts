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

/**
 * Most a fixed window's count reaches through a settlement's overcharge: twice the limit (within
 * what the Redis packing holds). Reservations outstanding in a window were admitted under the
 * limit, so they give back at most `limit`: a count of `2 × limit` stays at or above the limit
 * whatever they give back, as the true count would.
 */
const saturated = (limit: number): number => Math.min(2 * limit, 8_589_934_591);

const refundFixed: Algorithm["refund"] = (p, s, o, _log, now, cost, mark) => {
  const size = p.windowMs * 1000;
  if (s[o] === Math.max(Math.floor(now / size), s[o]!) && (mark === undefined || s[o] === mark)) s[o + 1] = Math.max(0, s[o + 1]! - cost);
  return (s[o]! + 1) * size;
};

/** Fixed window: [window index, count]. A window older than the stored one counts as the stored one. */
export const FIXED_WINDOW: Algorithm = {
  traits: WINDOW_TRAITS,
  width: 2,
  keepsLog: false,
  apply(p, s, o, _log, now, cost, out, i, charge) {
    const size = p.windowMs * 1000;
    const limit = p.limit;
    const index = Math.max(Math.floor(now / size), s[o]!);
    const count = s[o] === index ? s[o + 1]! : 0;
    const end = (index + 1) * size;
    out[i + 2] = ceilMs(end);
    if (count + cost <= limit) {
      out[i] = 1;
      out[i + 3] = 0;
      if (charge) {
        s[o] = index;
        s[o + 1] = count + cost;
        out[i + 1] = limit - count - cost;
        return end;
      }
    } else {
      out[i] = 0;
      out[i + 3] = cost > limit ? NEVER : ceilMs(end - now);
    }
    // Above the limit only when a lowered limit reads state charged under a larger one.
    out[i + 1] = Math.max(0, limit - count);
    return end;
  },
  // The mark is the window index charged. While the stored window is still that one, its count
  // includes the request's cost (a window's count only grows, but for refunds into it), so the
  // count less `cost` is never below the count without the request. Once another window is
  // stored, the charged one no longer counts: nothing to give back.
  refund: refundFixed,
  // An overcharge goes into the charged window while it is the current one, past the limit;
  // never into a later window.
  settle: /* @__PURE__ */ settleByDifference(refundFixed, (p, s, o, _log, now, cost, mark) => {
    const size = p.windowMs * 1000;
    if (s[o] === Math.max(Math.floor(now / size), s[o]!) && s[o] === mark) s[o + 1] = Math.min(s[o + 1]! + cost, saturated(p.limit));
    return (s[o]! + 1) * size;
  }),
  accepts: (s, o) => Number.isSafeInteger(s[o]) && Number.isSafeInteger(s[o + 1]) && s[o + 1]! >= 0,
};

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
 * Fixed window in Lua. Parameter: window ms. The stored window index is kept modulo 2^20 beside
 * the count in one integer (Redis int-encodes it); indexes compare by modular difference, so a
 * clock stepping back stays in the stored window, as in the TypeScript. Read: index, count, and
 * c = whether the stored state is that window's.
 */
const FW_READ = `local size, v = P * 1000, tonumber(redis.pcall("GET", k))
local index, count = floor(now / size), 0
c = false
if v and v >= 0 then
  local dd = (index - v) % 1048576
  if dd == 0 or dd >= 524288 then
    count, c = floor(v / 1048576), true
    if dd ~= 0 then index = index + (1048576 - dd) end
  end
end
`;

/** Redis state: the integer count * 2^20 + (window index mod 2^20). */
const FIXED_WINDOW_LUA: LuaAlgorithm = /* @__PURE__ */ (() => ({
  code: "f",
  parameter: (p: Policy) => p.windowMs,
  // Counts are packed with a 20-bit window index into one exact double.
  maxLimit: 4_294_967_296, // 2 ** 32
  fragments: {
    eval: `${FW_READ}local wend = (index + 1) * size
ok = count + cost <= L
out[i], out[i + 1], out[i + 2] = ok and 1 or 0, max(0, L - count), ceil(wend / 1000)
if ok then out[i + 3] = 0 elseif cost > L then out[i + 3] = -1 else out[i + 3] = ceil((wend - now) / 1000) end
a, b = index, count
`,
    // Same window: the key already expires when it ends.
    commit: `b = b + cost
if c then redis.call("INCRBY", k, cost == 1 and "1048576" or fmt("%d", cost * 1048576))
else redis.call("SET", k, fmt("%d", b * 1048576 + a % 1048576), "PX", fmt("%d", max(1, ceil(((a + 1) * P * 1000 - now) / 1000)))) end
out[i + 1], out[j] = L - b, a
`,
    settle: settleFragment(
      `${FW_READ}if c and index == m then redis.call("SET", k, fmt("%d", max(0, count - cost) * 1048576 + index % 1048576), "KEEPTTL") end
`,
      `${FW_READ}if c and index == m then redis.call("SET", k, fmt("%d", math.min(count + cost, 2 * L, 8589934591) * 1048576 + index % 1048576), "KEEPTTL") end
`,
    ),
    refund:
      `${FW_READ}if c and (m == nil or index == m) then redis.call("SET", k, fmt("%d", max(0, count - cost) * 1048576 + index % 1048576), "PX", fmt("%d", max(1, ceil(((index + 1) * size - now) / 1000)))) end
`,
  },
}))();

export const FIXED_WINDOW_DEFINITION: AlgorithmDefinition<"fixed-window"> = {
  traits: WINDOW_TRAITS,
  kind: "fixed-window",
  factoryName: "fixedWindow",
  lua: FIXED_WINDOW_LUA,
  docs: {
    call: "fixedWindow({ limit, window })",
    statePerKey: "two numbers",
    guarantee: "at most `limit` per window aligned to the epoch; up to `2 × limit` across a boundary",
    resetAt: "end of the current window",
  },
  exampleOptions: windowExample,
  retentionMs: (p) => p.windowMs,
};
