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
 * clock stepping back stays in the stored window, as in the TypeScript. A block of the key adds
 * the flag 2^52 (see {@link FW_BLOCK_MARK}), which the read sets aside in fl and every rewrite
 * keeps. Read: index, count, fl, and c = whether the stored state is that window's.
 */
const FW_READ = `local size, v = P * 1000, tonumber(redis.pcall("GET", k))
local index, count, fl = floor(now / size), 0, 0
c = false
if v and v >= 4503599627370496 then fl, v = 4503599627370496, v - 4503599627370496 end
if v and v >= 0 then
  local dd = (index - v) % 1048576
  if dd == 0 or dd >= 524288 then
    count, c = floor(v / 1048576), true
    if dd ~= 0 then index = index + (1048576 - dd) end
  end
end
`;

/**
 * The single-policy script's first step: a charge in the current window is one `INCRBY`, its
 * answer read in place of a `GET`, with no read of the block key. It answers `{value, now}` (see
 * {@link expandFixed}) when the value it finds is this window's, holds no block flag and was
 * there before: admitted, or denied and the `INCRBY` undone in the same call. Anything else (a
 * new key, another window, a flag, another kind's state) undoes the `INCRBY`, clearing a flag
 * whose block has ended, and falls through to the general path. A block is only ever started on
 * a key by the scripts that also flag it, so an unflagged value of the current window is unblocked.
 * `one`: the script for a charge of 1 on the server's clock, whose ARGV are only the limit and
 * the window (one argument less to pass and read: this is most decisions).
 */
const fwFast = (one: boolean): string => {
  const [L, P, c] = one ? ["ARGV[1]", "ARGV[2]", "1048576"] : ["ARGV[2]", "ARGV[3]", "c"];
  const open = one
    ? `local t = redis.call("TIME")
local now = t[1] * 1000000 + t[2]
local v = redis.pcall("INCRBY", KEYS[1], "1048576")
`
    : `local cost = ARGV[1] + 0
if cost > 0 then
local now, c = ARGV[4], cost * 1048576
if now then now = now + 0 else local t = redis.call("TIME") now = t[1] * 1000000 + t[2] end
local v = redis.pcall("INCRBY", KEYS[1], cost == 1 and "1048576" or string.format("%d", c))
`;
  return `${open}if type(v) == "number" then
local size = ${P} * 1000
if v % 1048576 == (now - now % size) / size % 1048576 and v ~= ${c} then
if v < (${L} + 1) * 1048576 then return {v, now} end
if v < 4503599627370496 then
redis.call("INCRBY", KEYS[1], ${one ? `"-1048576"` : `string.format("%d", -c)`})
return {v, now}
end
end
local u, bk = v - ${c}, KEYS[1] .. ":b"
if u == 0 then redis.call("DEL", KEYS[1])
elseif u >= 4503599627370496 and not ((tonumber(redis.pcall("GET", bk)) or 0) > now) then
redis.call("SET", KEYS[1], string.format("%d", u - 4503599627370496), "KEEPTTL")
else redis.call("INCRBY", KEYS[1], string.format("%d", -${c})) end
end
${one ? "" : "end\n"}`;
};

/**
 * Flags the fixed-window state in \`k\` as blocked (run by every script that starts a block on
 * it): the single-policy script's first step then leaves it to the general path, which reads the
 * block key. A missing key needs no flag: the first step never takes a new key.
 */
export const FW_BLOCK_MARK = `local fv = tonumber(redis.pcall("GET", k))
if fv and fv >= 0 and fv < 4503599627370496 then redis.call("SET", k, fmt("%d", fv + 4503599627370496), "KEEPTTL") end
`;

/**
 * The first step's answer \`{value, now}\` as the script's usual result: the value after the
 * charge's \`INCRBY\` (count × 2^20 + window index mod 2^20), now in µs. The same figures, by the
 * same double arithmetic, as the eval fragment's.
 */
function expandFixed(reply: unknown, cost: number, limit: number, windowMs: number): number[] | undefined {
  if (!Array.isArray(reply) || reply.length !== 2 || typeof reply[0] !== "number" || typeof reply[1] !== "number") return undefined;
  const size = windowMs * 1000;
  const now = reply[1]!;
  const index = Math.floor(now / size);
  const count = Math.floor(reply[0]! / 1048576);
  const end = Math.ceil(((index + 1) * size) / 1000);
  if (count <= limit) return [1, 1, limit - count, end, 0, index];
  const before = count - cost;
  return [0, 0, Math.max(0, limit - before), end, cost > limit ? -1 : Math.ceil(((index + 1) * size - now) / 1000)];
}

/** Redis state: the integer count * 2^20 + (window index mod 2^20). */
const FIXED_WINDOW_LUA: LuaAlgorithm = /* @__PURE__ */ (() => ({
  code: "f",
  parameter: (p: Policy) => p.windowMs,
  // Counts are packed with a 20-bit window index into one exact double, below the block flag
  // 2^52; a settlement's overcharge takes a count to at most twice the limit.
  maxLimit: 2_147_483_647, // 2 ** 31 - 1
  fast: { source: fwFast, expand: expandFixed },
  blockMark: FW_BLOCK_MARK,
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
      `${FW_READ}if c and index == m then redis.call("SET", k, fmt("%d", fl + max(0, count - cost) * 1048576 + index % 1048576), "KEEPTTL") end
`,
      `${FW_READ}if c and index == m then redis.call("SET", k, fmt("%d", fl + math.min(count + cost, 2 * L, 8589934591) * 1048576 + index % 1048576), "KEEPTTL") end
`,
    ),
    refund:
      `${FW_READ}if c and (m == nil or index == m) then redis.call("SET", k, fmt("%d", fl + max(0, count - cost) * 1048576 + index % 1048576), "PX", fmt("%d", max(1, ceil(((index + 1) * size - now) / 1000)))) end
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
