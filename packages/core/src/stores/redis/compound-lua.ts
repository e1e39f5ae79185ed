import { dispatch, KEPT, type LuaScript, markBlock, POLICY, prelude, readBlock } from "./lua.ts";

/*
 * The compound script: several (policy set, key) pairs decided and charged in one atomic call
 * (RateLimitStore.consumeMany). Built from the same per-kind fragments and per-policy preamble as
 * the multi-policy script, over the pairs' policies laid end to end: each pair's keys and stored
 * state are exactly those a single-key call of its set uses.
 *
 *   KEYS      every pair's policy keys, pair after pair (`prefix{identifier}`, `:1`, `:2`...)
 *   ARGV[1]   the cost (charged to every pair)
 *   per policy p, from ARGV[p * 3 - 1]: kind letter, limit, parameter (as the multi script)
 *   then now in µs ("" for the server's clock), then the number of pairs D, then per pair the
 *   index of its first key, then per policy its `block` in ms ("0": none)
 * Every policy is evaluated; a pair whose block key (`<its first key>:b`) is live is denied as
 * blocked (the block key read only when the pair's first state may be blocked, lua.ts `readBlock`). All admit: every policy is charged (each kind's commit) and the answer is the multi
 * script's, over all the policies, marks included. Any denies: nothing is charged, and each
 * denying pair's key is blocked for the longest `block` of its denying policies (as a denied
 * consume of that pair would be); the answer carries the figures without marks.
 */

function compoundScript(): string {
  return `${prelude("#KEYS * 3 + 2")}local n = #KEYS
local out, h = {1}, ${KEPT}
local nd = ARGV[n * 3 + 3] + 0
local held, first = {}, {}
for dd = 1, nd do first[ARGV[n * 3 + 3 + dd] + 0] = dd end
for p = 1, n do
${POLICY}${dispatch("eval")}if not ok then out[1] = 0 end
if first[p] then
local bu
${readBlock('KEYS[p] .. ":b"')}if bu and bu > now then
held[first[p]] = bu
out[1] = 0
end
end
h[y], h[y + 1], h[y + 2], h[y + 3], h[y + 4] = a, b, c, d, e
end
if out[1] == 0 then
for dd = 1, nd do
local ds, de = ARGV[n * 3 + 3 + dd] + 0, n
if dd < nd then de = ARGV[n * 3 + 4 + dd] - 1 end
local bu = held[dd]
if not bu and charge then
local bm = 0
for p = ds, de do
local v = ARGV[n * 3 + 3 + nd + p] + 0
if out[p * 4 - 2] == 0 and v > bm then bm = v end
end
if bm > 0 then
local bk = KEYS[ds] .. ":b"
bu = now + bm * 1000
redis.call("SET", bk, fmt("%d", bu), "PX", fmt("%d", bm))
${markBlock("KEYS[ds]", "ARGV[ds * 3 - 1]")}end
end
if bu then
for q = ds * 4 - 2, de * 4 - 2, 4 do
out[q], out[q + 1] = 0, 0
if out[q + 2] < ceil(bu / 1000) then out[q + 2] = ceil(bu / 1000) end
if out[q + 3] ~= -1 and out[q + 3] < ceil((bu - now) / 1000) then out[q + 3] = ceil((bu - now) / 1000) end
end
end
end
return out
end
if charge then
for p = 1, n do
${POLICY}a, b, c, d, e = h[y], h[y + 1], h[y + 2], h[y + 3], h[y + 4]
${dispatch("commit")}end
end
return out
`;
}

/** SHA1 of the compound script, precomputed (test/redis/lua-sha.test.ts recomputes it). */
export const COMPOUND_SCRIPT_SHA = "428b311df3e14a527b1704a5f21606ef13b50214";

let script: LuaScript | undefined;

/** The compound script, built on first use. */
export function compoundLua(): LuaScript {
  return script ??= { source: compoundScript(), sha: COMPOUND_SCRIPT_SHA };
}
