import { BLOCKED, dispatch, KEPT, type LuaScript, newOut, prelude, READ_NOW, readBlock, startBlock } from "./lua.ts";

/*
 * The two reservation scripts, one atomic call each, for every policy set (single policies too:
 * they dispatch on the kind letter as the multi-policy script does).
 *
 *   KEYS      the policy keys (`prefix{identifier}`, then `:1`, `:2`...), then the ledger key
 *             `prefix{identifier}:r:<id>` (same hash tag: one Cluster slot)
 *   reserve   ARGV[1] the estimate; per policy p, from ARGV[p * 3 - 1]: kind letter, limit,
 *             parameter; then now in µs ("" for the server's clock); then the ttl in ms;
 *             then, when a policy has a \`block\`, per policy its block in ms. A blocked key
 *             (\`<first key>:b\`) is denied and charged nothing; a denial by a blocking policy
 *             blocks the key, as the consume scripts do.
 *             Admitted: every policy charged (each kind's commit) and the ledger key written as
 *             "expiresAtUs:estimate:mark1:mark2..." with PX ttl (no ledger key without a TTL).
 *             The expiry is on the script's clock, so a ledger read on injected time expires as
 *             the memory store's does. Answer: the consume script's (figures, then the marks).
 *   settle    ARGV[1] the actual cost; the same per-policy triples; now ("" for the server's
 *             clock). Reads and deletes the ledger key: none (settled, cancelled, expired)
 *             answers 0 and changes nothing; else each kind's settle fragment runs with est,
 *             act and its mark m, and the answer is 1.
 */

const POLICY = (n: string): string =>
  `local k, i, j, x, y = KEYS[p], p * 4 - 2, ${n} * 4 + 1 + p, p * 3 - 1, p * 5
local kind, L, P = ARGV[x], ARGV[x + 1] + 0, ARGV[x + 2] + 0
`;

function reserveScript(): string {
  return `${prelude("#KEYS * 3 - 1")}local n = #KEYS - 1
${newOut("n")}local h, bu = ${KEPT}
for p = 1, n do
${POLICY("n")}${dispatch("eval")}if not ok then out[1] = 0 end
if p == 1 then
${readBlock('KEYS[1] .. ":b"')}end
h[y], h[y + 1], h[y + 2], h[y + 3], h[y + 4] = a, b, c, d, e
end
if bu and bu > now then
${BLOCKED}return out
end
if out[1] == 0 then
local bk = KEYS[1] .. ":b"
${startBlock("#KEYS * 3", "n")}return out
end
if out[1] == 1 and charge then
local rec = {fmt("%d", now + ARGV[#KEYS * 3] * 1000), fmt("%d", cost)}
for p = 1, n do
${POLICY("n")}a, b, c, d, e = h[y], h[y + 1], h[y + 2], h[y + 3], h[y + 4]
${dispatch("commit")}rec[p + 2] = fmt("%d", out[j])
end
redis.call("SET", KEYS[n + 1], table.concat(rec, ":"), "PX", ARGV[#KEYS * 3])
end
return out
`;
}

function settleScript(): string {
  return `local floor, ceil, max, fmt = math.floor, math.ceil, math.max, string.format
local n = #KEYS - 1
local act, now = ARGV[1] + 0, ARGV[n * 3 + 2]
${READ_NOW}local rec = redis.pcall("GET", KEYS[n + 1])
if type(rec) ~= "string" then return 0 end
redis.call("DEL", KEYS[n + 1])
local f = {}
for v in string.gmatch(rec, "[^:]+") do f[#f + 1] = tonumber(v) end
if #f ~= n + 2 or f[1] <= now then return 0 end
local est, ok, a, b, c, d, e, cost = f[2]
for p = 1, n do
local k, x, m = KEYS[p], p * 3 - 1, f[p + 2]
local kind, L, P = ARGV[x], ARGV[x + 1] + 0, ARGV[x + 2] + 0
${dispatch("settle")}end
return 1
`;
}

/**
 * SHA1 of each script, precomputed so no runtime needs a hash function; test/redis/lua-sha.test.ts
 * recomputes them (and prints the new values when a script changes).
 */
export const RESERVATION_SCRIPT_SHA = {
  reserve: "80cae2fb8777c15a46f7822aebc14395b88b18f4",
  settle: "eddb7a129e5d8b6f5df495ceef1a9864504fad40",
} as const;

let scripts: { readonly reserve: LuaScript; readonly settle: LuaScript } | undefined;

/** The reserve and settle scripts, built on first use. */
export function reservationScripts(): { readonly reserve: LuaScript; readonly settle: LuaScript } {
  return scripts ??= {
    reserve: { source: reserveScript(), sha: RESERVATION_SCRIPT_SHA.reserve },
    settle: { source: settleScript(), sha: RESERVATION_SCRIPT_SHA.settle },
  };
}

/** The ledger key of reservation `id` under a base key `prefix{identifier}`. */
export const ledgerKey = (base: string, id: string): string => `${base}:r:${id}`;
