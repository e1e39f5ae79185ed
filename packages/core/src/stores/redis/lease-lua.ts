import type { LuaFragments } from "../../algorithms/algorithm.ts";
import { ALGORITHMS, POLICY_KINDS, type PolicyKind } from "../../algorithms/registry.ts";
import { BLOCKED, type LuaScript, READ_NOW } from "./lua.ts";

/*
 * The lease script: one atomic call that returns a previous lease's unspent units, decides the
 * current request exactly as the consume scripts do, and, when it is admitted and every policy
 * has enough left, charges `g` extra units to every policy and records the lease. It pastes the
 * kinds' own fragments (eval, commit, refund), so a leased decision is computed by the very code
 * an exact one is. The sliding log has no place here: a set containing one is never leased.
 *
 *   KEYS[1..n]  the policies' keys (as the consume scripts)
 *   KEYS[n + 1] the new lease's ledger record; KEYS[n + 2..] the records of previous leases
 *               being returned (each may no longer exist)
 *   ARGV[1] the request's cost (0: no request, only a refresh or returns)
 *   ARGV[2] units wanted for the lease; ARGV[3] longest lease life, µs; ARGV[4] shortest life
 *           worth granting, µs; ARGV[5] how many previous leases are returned (r); ARGV[6] now
 *           in µs, "" for the server's clock
 *   from ARGV[7], per policy: kind letter, limit, parameter (the limit already less the kind's
 *   lease reserve; a windowed kind's parameter is its window, ms); then per returned lease its unspent units
 * Reply, always 1 + 5n + 3 integers: allowed, per policy (allowed, remaining, resetAt ms,
 * retryAfterMs), per policy the charge's mark (0 when nothing was charged), g, the lease's life
 * from now in µs, now in µs.
 *
 * A blocked key (its block key \`<first key>:b\` live) is denied as the consume scripts deny it:
 * nothing charged, no lease; the returns still count.
 *
 * The ledger record holds the reply as charged, with the lease's end (µs) where the life goes:
 * `g` and the marks say what a return gives back and where; a retried call with the same lease
 * id finds its record and answers from it without charging again. A return deletes the record
 * first thing, so a retried return gives nothing back twice.
 */

/** The kinds that declare a lease (registry order), and those whose charges go into no period. */
const LEASED_KINDS: readonly PolicyKind[] = /* @__PURE__ */ POLICY_KINDS.filter((kind) => ALGORITHMS[kind].traits.lease !== undefined);
const UNWINDOWED = (): string[] =>
  LEASED_KINDS.filter((kind) => !ALGORITHMS[kind].traits.lease!.windowed).map((kind) => ALGORITHMS[kind].lua.code);

function dispatch(part: keyof LuaFragments): string {
  const code = (kind: PolicyKind): string => {
    const f = ALGORITHMS[kind].lua.fragments;
    return part === "grant" ? f.grant ?? f.eval : f[part]!;
  };
  const branches = LEASED_KINDS.map((kind) => `kind == "${ALGORITHMS[kind].lua.code}" then\n${code(kind)}`);
  return `if ${branches.join("elseif ")}else error("kind not leasable") end\n`;
}

const POLICY = `local k, i, j, x, y = KEYS[p], p * 4 - 2, n * 4 + 1 + p, p * 3 + 4, p * 5
local kind, L, P = ARGV[x], ARGV[x + 1] + 0, ARGV[x + 2] + 0
`;

function leaseScript(): string {
  return `local floor, ceil, max, min, fmt = math.floor, math.ceil, math.max, math.min, string.format
local back = ARGV[5] + 0
local n = #KEYS - 1 - back
local req, want, life, minlife, now = ARGV[1] + 0, ARGV[2] + 0, ARGV[3] + 0, ARGV[4] + 0, ARGV[6]
${READ_NOW}local rn = 1 + 5 * n + 3
local ok, a, b, c, d, e, cost, m
local g, wend = 0, now
local again = redis.call("GET", KEYS[n + 1])
if again then
  local r = {}
  for v in string.gmatch(again, "[^,]+") do r[#r + 1] = v + 0 end
  r[rn - 1], r[rn] = max(0, r[rn - 1] - now), now
  return r
end
for q = 1, back do
  local prev = redis.call("GET", KEYS[n + 1 + q])
  if prev then
    redis.call("DEL", KEYS[n + 1 + q])
    local r = {}
    for v in string.gmatch(prev, "[^,]+") do r[#r + 1] = v + 0 end
    cost = min(ARGV[6 + 3 * n + q] + 0, r[rn - 2])
    if cost > 0 then
      for p = 1, n do
${POLICY}m = r[1 + 4 * n + p]
${dispatch("refund")}end
    end
  end
end
local function evalAll(out, h)
  out[1] = 1
  for p = 1, n do
${POLICY}${dispatch("eval")}if not ok then out[1] = 0 end
h[y], h[y + 1], h[y + 2], h[y + 3], h[y + 4] = a, b, c, d, e
end
end
local function grantAll(out, h)
  out[1] = 1
  for p = 1, n do
${POLICY}${dispatch("grant")}if not ok then out[1] = 0 end
h[y], h[y + 1], h[y + 2], h[y + 3], h[y + 4] = a, b, c, d, e
end
end
local function commitAll(out, h)
  for p = 1, n do
${POLICY}a, b, c, d, e = h[y], h[y + 1], h[y + 2], h[y + 3], h[y + 4]
${dispatch("commit")}end
end
local out, h = {}, {}
cost = req > 0 and req or 1
evalAll(out, h)
local bu = tonumber(redis.pcall("GET", KEYS[1] .. ":b"))
if bu and bu > now then
${BLOCKED}end
if out[1] == 1 then
  g = want
  wend = now + life
  for p = 1, n do
    local x = p * 3 + 4
    local kind, L, P = ARGV[x], ARGV[x + 1] + 0, ARGV[x + 2] + 0
    local rest = out[p * 4 - 1] - req
    if rest < max(ceil(L / 100), 2 * cost) then g = 0 else g = min(g, floor(rest / 2)) end
    if ${UNWINDOWED().map((code) => `kind ~= "${code}"`).join(" and ")} then wend = min(wend, (floor(now / (P * 1000)) + 1) * P * 1000) end
  end
  -- What was wanted is for a whole lease life: a lease cut short by a window's end gets its share.
  if wend - now < life then g = min(g, floor(want * (wend - now) / life)) end
  if wend - now < minlife then g = 0 end
  if g > 0 then
    local out2, h2 = {}, {}
    cost = req + g
    grantAll(out2, h2)
    if out2[1] == 1 then
      commitAll(out2, h2)
      out = out2
    else
      g = 0
    end
  end
  if g == 0 and req > 0 then
    cost = req
    commitAll(out, h)
  end
  life = wend - now
end
if req == 0 then out[1] = g > 0 and 1 or 0 end
for q = 1, n do if not out[4 * n + 1 + q] or g == 0 and req == 0 or out[1] == 0 then out[4 * n + 1 + q] = 0 end end
out[rn - 2], out[rn - 1], out[rn] = g, g > 0 and life or 0, now
if g > 0 then
  local s = {}
  for q = 1, rn do s[q] = fmt("%d", out[q]) end
  s[rn - 1] = fmt("%d", now + life)
  redis.call("SET", KEYS[n + 1], table.concat(s, ","), "PX", fmt("%d", ceil(life / 1000) + 10000))
end
return out
`;
}

/** The lease script's SHA1, precomputed (a test recomputes it from the source). */
export const LEASE_SCRIPT_SHA = "3ff4c0f6c994955302e935fad06d4c39c1caf51a";

let script: LuaScript | undefined;

/** The lease script, built on first use. */
export function leaseLuaScript(): LuaScript {
  return script ??= { source: leaseScript(), sha: LEASE_SCRIPT_SHA };
}
