import type { LuaFragments } from "../../algorithms/algorithm.ts";
import { ALGORITHMS, POLICY_KINDS, type PolicyKind } from "../../algorithms/registry.ts";

/*
 * The Redis side of the algorithms: Lua that mirrors their TypeScript operation for operation
 * (same integer µs, same expressions in the same order, so doubles round identically) and
 * returns the same flat result. Runs on vanilla Redis 7 and Valkey: no shebang flags, only
 * GET/SET (PX, KEEPTTL)/INCRBY/LINDEX/LLEN/LPOP/RPUSH/LTRIM/LREM/PEXPIRE/DEL/TIME.
 *
 * Calling convention of every script (every argument costs Redis about 1,000 instructions, so
 * there are few):
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

/** Reads cost (refund: whether to refund it; charge: whether to consume it) and now (µs). */
export const prelude = (nowAt: string): string =>
  `local floor, ceil, max, fmt = math.floor, math.ceil, math.max, string.format
local cost, now = ARGV[1] + 0, ARGV[${nowAt}]
local refund, charge = cost < 0, cost > 0
if refund then cost = -cost elseif not charge then cost = 1 end
if now and now ~= "" then
  now = now + 0
else
  local t = redis.call("TIME")
  now = t[1] * 1000000 + t[2]
end
local ok, a, b, c, d, e
`;

function singleScript(kind: PolicyKind): string {
  const f = ALGORITHMS[kind].lua.fragments;
  return `${prelude("4")}local k, L, P = KEYS[1], ARGV[2] + 0, ARGV[3] + 0
if refund then
local m = ARGV[5]
if m then m = m + 0 end
${f.refund}return 0
end
local out, i, j = {0, 0, 0, 0, 0}, 2, 6
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

const POLICY = `local k, i, j, x, y = KEYS[p], p * 4 - 2, #KEYS * 4 + 1 + p, p * 3 - 1, p * 5
local kind, L, P = ARGV[x], ARGV[x + 1] + 0, ARGV[x + 2] + 0
`;

function multiScript(): string {
  return `${prelude("#KEYS * 3 + 2")}local out, h = {1}, {}
for p = 1, #KEYS do
${POLICY}if refund then
local m = ARGV[#KEYS * 3 + 2 + p]
if m then m = m + 0 end
${dispatch("refund")}else
${dispatch("eval")}if not ok then out[1] = 0 end
h[y], h[y + 1], h[y + 2], h[y + 3], h[y + 4] = a, b, c, d, e
end
end
if refund then return 0 end
if out[1] == 1 and charge then
for p = 1, #KEYS do
${POLICY}a, b, c, d, e = h[y], h[y + 1], h[y + 2], h[y + 3], h[y + 4]
${dispatch("commit")}end
end
return out
`;
}

/** A script's source and its SHA1 (for EVALSHA). */
export interface LuaScript {
  readonly source: string;
  readonly sha: string;
}

/**
 * SHA1 of each script, precomputed so no runtime needs a hash function; a test recomputes them
 * from the sources (and prints the new values when a script changes).
 */
export const SCRIPT_SHA: Readonly<Record<PolicyKind | "multi", string>> = {
  "token-bucket": "d4663c44acee0d581b8a9c952501a65d2f213bf9",
  "fixed-window": "f2f97b21f0175a091e8264ce5da4a87ffb3b9729",
  "sliding-window": "046daa16ba33f5aa3cb684c61da93a8cb59f9bbb",
  "sliding-log": "4ae0ae429af97cb8fd6bd399985e79665574edff",
  concurrency: "72f051661616ac4d69bb592cd5e944d10a78d08b",
  multi: "b5bd675b3f73b72bf644b26ddd320d407b2ead9d",
};

let scripts: Record<PolicyKind | "multi", LuaScript> | undefined;

/** The scripts (one per kind, and the multi-policy one), built on first use (nothing runs at import time). */
export function luaScripts(): Readonly<Record<PolicyKind | "multi", LuaScript>> {
  if (scripts === undefined) {
    const built: Partial<Record<PolicyKind | "multi", LuaScript>> = {};
    for (const kind of POLICY_KINDS) built[kind] = { source: singleScript(kind), sha: SCRIPT_SHA[kind] };
    built.multi = { source: multiScript(), sha: SCRIPT_SHA.multi };
    scripts = built as Record<PolicyKind | "multi", LuaScript>;
  }
  return scripts;
}
