import type { LuaFragments } from "../../algorithms/algorithm.ts";
import { ALGORITHMS, POLICY_KINDS, type PolicyKind } from "../../algorithms/registry.ts";

/*
 * The Redis side of the algorithms: Lua that mirrors their TypeScript operation for operation
 * (same integer µs, same expressions in the same order, so doubles round identically) and
 * returns the same flat result. Runs on vanilla Redis 7 and Valkey: no shebang flags, only
 * GET/SET (PX, KEEPTTL)/INCRBY/LINDEX/LLEN/RPUSH/LTRIM/LREM/PEXPIRE/DEL/TIME.
 *
 * Calling convention of every script (every argument costs Redis time, so there are few; see
 * bench/README.md):
 *   KEYS[p]   the key of policy p (`prefix{identifier}`, then `:1`, `:2`...)
 *   ARGV[1]   the cost to consume; "0" to peek (cost 1, charges nothing); minus the cost to refund
 *   single-policy scripts: ARGV[2] limit, ARGV[3] parameter
 *   multi-policy script: per policy p, from ARGV[p * 3 - 1]: kind letter, limit, parameter
 *   (parameter: the kind's `lua.parameter`, e.g. a token bucket's µs per token, a window in ms)
 *   then, optional: now in integer µs; absent or "", the script reads the server's clock (TIME)
 *   a refund into marks: now (or ""), then per policy its mark (see `Algorithm.mark`)
 * Result: `{allowed, per policy: allowed, remaining, resetAt ms, retryAfterMs}`, then, when
 * charged, per policy the charge's mark; every value an integer (Redis truncates Lua numbers);
 * refunds return 0.
 *
 * State, one key per policy, each with a TTL of exactly the time its state still matters; each
 * kind's layout is described beside its fragments (algorithms/<kind>.ts).
 *
 * Speed (every decision runs the whole script): no function is defined per call — each kind is a
 * fragment of straight-line code (its `lua.fragments`), pasted into its single-policy script and into the branches of
 * the multi-policy loop. Fragments share the names k (key), L (limit), P (parameter), cost, now,
 * out and i (this policy's offset in out); eval sets ok and hands commit its state in a..e;
 * commit writes the charge's mark to out[j]; refund gives back into the mark m (nil: into the
 * current state).
 * ARGV strings become numbers by arithmetic coercion (x + 0: cheaper than a tonumber call).
 * Numbers go to redis.call as strings, written with fmt("%d") (exact up to 2^63): a number
 * argument would cost more (Redis 7.0 prints it with %.17g) and is not exact everywhere (Redis
 * 7.2.0-7.2.4 print 100000000 as 1e+08; Lua's own tostring rounds past 14 digits). A GET or
 * LINDEX through redis.pcall turns a key of another type (state of another kind of policy,
 * after a limiter was reconfigured under the same prefix) into a table, which reads as absent
 * and is overwritten.
 */

/** Turns \`now\` (an ARGV string, µs) into a number; absent or "", reads the server's clock (TIME). */
export const READ_NOW = `if now and now ~= "" then
  now = now + 0
else
  local t = redis.call("TIME")
  now = t[1] * 1000000 + t[2]
end
`;

/** Reads cost (refund: whether to refund it; charge: whether to consume it) and now (µs). */
export const prelude = (nowAt: string): string =>
  `local floor, ceil, max, fmt = math.floor, math.ceil, math.max, string.format
local cost, now = ARGV[1] + 0, ARGV[${nowAt}]
local refund, charge = cost < 0, cost > 0
if refund then cost = -cost elseif not charge then cost = 1 end
${READ_NOW}local ok, a, b, c, d, e
`;

/**
 * A blocked key (its block key \`<first key>:b\` holds the end of the block, µs, beside a TTL):
 * every policy denied with 0 remaining, its reset and wait at least until the block ends. Run
 * after the eval fragments, with \`bu\` the end of the block; nothing is committed.
 */
export const BLOCKED = `out[1] = 0
for q = 2, #out, 4 do
  out[q], out[q + 1] = 0, 0
  if out[q + 2] < ceil(bu / 1000) then out[q + 2] = ceil(bu / 1000) end
  if out[q + 3] ~= -1 and out[q + 3] < ceil((bu - now) / 1000) then out[q + 3] = ceil((bu - now) / 1000) end
end
`;

/**
 * After a charging denial: blocks the key (\`bk\`, \`bu\` as in {@link BLOCKED}) for the longest
 * \`block\` among the policies that denied, read per policy p from \`ARGV[at + p]\` (absent when no
 * policy of the set blocks), in the same script call; then reports the block.
 */
export const startBlock = (at: string, count: string): string =>
  `local bm = 0
for p = 1, ${count} do
local v = ARGV[${at} + p]
if v and out[p * 4 - 2] == 0 and v + 0 > bm then bm = v + 0 end
end
if bm > 0 then
bu = now + bm * 1000
redis.call("SET", bk, fmt("%d", bu), "PX", fmt("%d", bm))
${markBlock("KEYS[1]", "ARGV[2]")}${BLOCKED}end
`;

/**
 * After a block key is written: the blocked state key (\`key\`, its policy's kind letter in
 * \`kind\`) marked as its kind requires (\`LuaAlgorithm.blockMark\`, which reads the block's end
 * in \`bu\` and the clock in \`now\`), so that a script that skips the block key for unmarked state
 * sees the block.
 */
export function markBlock(key: string, kind: string): string {
  const marked = POLICY_KINDS.filter((k) => ALGORITHMS[k].lua.blockMark !== undefined);
  const branches = marked.map((k) => `${kind} == "${ALGORITHMS[k].lua.code}" then\nlocal k = ${key}\n${ALGORITHMS[k].lua.blockMark}`);
  return branches.length === 0 ? "" : `if ${branches.join("elseif ")}end\n`;
}

/**
 * Run after the eval fragment of a set's first policy (\`kind\`, carried values a..e), with \`bk\`
 * the Lua expression of its block key: sets \`bu\` (declared by the caller) from the block key unless the
 * kind's state proves the key unblocked by carrying no flag (\`LuaAlgorithm.flag\`; a blocked key's
 * state is present and flagged until the block ends, block-flag.ts). A flagged state whose block
 * is over loses its flag in the commit, as the single-policy step's first admission after a block
 * removes it. Kinds without a flag always read the block key.
 */
export function readBlock(bk: string): string {
  const flagged = POLICY_KINDS.filter((k) => ALGORITHMS[k].lua.flag !== undefined);
  if (flagged.length === 0) return `bu = tonumber(redis.pcall("GET", ${bk}))\n`;
  const test = flagged.map((k) => `kind == "${ALGORITHMS[k].lua.code}" then mb = ${ALGORITHMS[k].lua.flag!.read}\n`);
  const clear = flagged.map((k) => `kind == "${ALGORITHMS[k].lua.code}" then ${ALGORITHMS[k].lua.flag!.clear}\n`);
  return `local mb = true
if ${test.join("elseif ")}end
if mb then
bu = tonumber(redis.pcall("GET", ${bk}))
if not (bu and bu > now) then
if ${clear.join("elseif ")}end
end
end
`;
}

function singleScript(kind: PolicyKind): string {
  const f = ALGORITHMS[kind].lua.fragments;
  return `${ALGORITHMS[kind].lua.fast?.source(false) ?? ""}${prelude("4")}local k, L, P = KEYS[1], ARGV[2] + 0, ARGV[3] + 0
if refund then
local m = ARGV[5]
if m then m = m + 0 end
${f.refund}return 0
end
local out, i, j = {0, 0, 0, 0, 0}, 2, 6
local bk = k .. ":b"
local bu = tonumber(redis.pcall("GET", bk))
if bu and bu > now then
${f.eval}${BLOCKED}return out
end
${f.eval}if ok then
out[1] = 1
if charge then
${f.commit}end
end
return out
`;
}

/** `if kind == "t" then <t's fragment> elseif ... end` over every kind, in the registry's order. */
export function dispatch(part: keyof LuaFragments): string {
  const branches = POLICY_KINDS.map((kind) => `kind == "${ALGORITHMS[kind].lua.code}" then\n${ALGORITHMS[kind].lua.fragments[part]}`);
  return `if ${branches.join("elseif ")}end\n`;
}

/**
 * The table a multi-policy script keeps each policy's carried values in between its eval and its
 * commit (five per policy), made at the size of two policies' (its array part then never grows
 * for them, where growing it costs a rehash at each power of two).
 */
export const KEPT = "{0, 0, 0, 0, 0, 0, 0, 0, 0, 0}";

/**
 * A script's result table \`out\` for \`n\` policies, the overall flag 1 first: made at its size
 * (1 + 4 per policy, the figures every eval writes) for sets of one to three policies, the usual
 * ones, so that it is not rehashed as it fills; the marks a charge appends grow it once. Any other
 * size starts from the flag alone. Its length is the reply's.
 */
export const newOut = (n: string): string =>
  `local out
if ${[1, 2, 3].map((k) => `${n} == ${k} then out = {1${", 0".repeat(4 * k)}}\n`).join("elseif ")}else out = {1} end
`;

export const POLICY = `local k, i, j, x, y = KEYS[p], p * 4 - 2, #KEYS * 4 + 1 + p, p * 3 - 1, p * 5
local kind, L, P = ARGV[x], ARGV[x + 1] + 0, ARGV[x + 2] + 0
`;

function multiScript(): string {
  return `${prelude("#KEYS * 3 + 2")}${newOut("#KEYS")}local h, bu = ${KEPT}
for p = 1, #KEYS do
${POLICY}if refund then
local m = ARGV[#KEYS * 3 + 2 + p]
if m then m = m + 0 end
${dispatch("refund")}else
${dispatch("eval")}if not ok then out[1] = 0 end
if p == 1 then
${readBlock('KEYS[1] .. ":b"')}end
h[y], h[y + 1], h[y + 2], h[y + 3], h[y + 4] = a, b, c, d, e
end
end
if refund then return 0 end
if bu and bu > now then
${BLOCKED}return out
end
if out[1] == 0 and charge then
local bk = KEYS[1] .. ":b"
${startBlock("#KEYS * 3 + 2", "#KEYS")}return out
end
if out[1] == 1 and charge then
for p = 1, #KEYS do
${POLICY}a, b, c, d, e = h[y], h[y + 1], h[y + 2], h[y + 3], h[y + 4]
${dispatch("commit")}end
end
return out
`;
}

/**
 * Penalties and manual blocks, rarely called, in a script of their own (the decision scripts stay
 * as short as they can be). ARGV: "p" (penalty) or "b" (block), the cost or the block's ms, now
 * (or "" for the server's clock), then per policy kind letter, limit, parameter as in the
 * multi-policy script. A penalty charges each policy what it has left, up to the cost.
 */
function adminScript(): string {
  return `local floor, ceil, max, fmt = math.floor, math.ceil, math.max, string.format
local op, amount, now = ARGV[1], ARGV[2] + 0, ARGV[3]
if now ~= "" then
  now = now + 0
else
  local t = redis.call("TIME")
  now = t[1] * 1000000 + t[2]
end
if op == "b" then
local bk, bu = KEYS[1] .. ":b", now + amount * 1000
redis.call("SET", bk, fmt("%d", bu), "PX", fmt("%d", amount))
${markBlock("KEYS[1]", "ARGV[4]")}return 0
end
local ok, a, b, c, d, e, cost
for p = 1, #KEYS do
local k, i, j, x = KEYS[p], 2, 6, p * 3 + 1
local kind, L, P = ARGV[x], ARGV[x + 1] + 0, ARGV[x + 2] + 0
local out = {0, 0, 0, 0, 0, 0}
cost = 1
${dispatch("eval")}if out[3] > 0 then
cost = math.min(amount, out[3])
${dispatch("eval")}if ok then
${dispatch("commit")}end
end
end
return 0
`;
}

/**
 * A kind's script for a charge of 1 on the server's clock, for the kinds with a first step
 * (\`LuaAlgorithm.fast\`): that step with ARGV limit and parameter only, then the kind's script
 * reading its ARGV from a table made as the kind's script would receive them.
 */
function oneScript(kind: PolicyKind): string {
  return `${ALGORITHMS[kind].lua.fast!.source(true)}local A = {"1", ARGV[1], ARGV[2]}
${singleScript(kind).replace(/^[\s\S]*?(?=local floor, ceil)/, "").replaceAll("ARGV[", "A[")}`;
}

/** The scripts: one per kind, one for a charge of 1 of some kinds, the multi-policy one, and the one for penalties and blocks. */
export type ScriptName = PolicyKind | `${PolicyKind}:1` | "multi" | "admin";

/** The scripts by name: every one but the charge-of-1 scripts of kinds without a first step. */
export type Scripts = Readonly<Record<PolicyKind | "multi" | "admin", LuaScript> & Partial<Record<`${PolicyKind}:1`, LuaScript>>>;

/** A script's source and its SHA1 (for EVALSHA). */
export interface LuaScript {
  readonly source: string;
  readonly sha: string;
}

/**
 * SHA1 of each script, precomputed so no runtime needs a hash function; a test recomputes them
 * from the sources (and prints the new values when a script changes).
 */
export const SCRIPT_SHA: Readonly<Partial<Record<ScriptName, string>>> = {
  "token-bucket": "732d797ece1ecda21b5068f57f3bbab3e07f348f",
  "fixed-window": "74344e632dd1c914144f27dddbaa0cbab5458705",
  "sliding-window": "70e73238cf4ac4231cec7d40ff87102b55e1ef8c",
  "sliding-log": "3a44f33f4c58a416b82f579f76bb024337f3044a",
  concurrency: "8f5f299998e68ddfac4ef0b9d324a51622824729",
  admin: "66a55ed58d382394e041f627804675f0a202ead9",
  "calendar-window": "813222cb073e1c9984ee27b3bf43f8a2853bc2b3",
  "fixed-window:1": "aa3d43292ac13e774303b18bef55d5ccc95146c5",
  "token-bucket:1": "939d7e3739a7ccc92d0ed1c682925036d9138d1d",
  "sliding-window:1": "9173b39b99017e50be764dc38b4bbc5900b5fcaa",
  multi: "87aa1c7bd7baf8f722fb201d430a9b31a326057e",
};

let scripts: Scripts | undefined;

/** The scripts (see {@link ScriptName}), built on first use (nothing runs at import time). */
export function luaScripts(): Scripts {
  if (scripts === undefined) {
    const built: Partial<Record<ScriptName, LuaScript>> = {};
    for (const kind of POLICY_KINDS) built[kind] = { source: singleScript(kind), sha: SCRIPT_SHA[kind]! };
    for (const kind of POLICY_KINDS) {
      if (ALGORITHMS[kind].lua.fast !== undefined) built[`${kind}:1`] = { source: oneScript(kind), sha: SCRIPT_SHA[`${kind}:1`]! };
    }
    built.multi = { source: multiScript(), sha: SCRIPT_SHA.multi! };
    built.admin = { source: adminScript(), sha: SCRIPT_SHA.admin! };
    scripts = built as Scripts;
  }
  return scripts;
}
