import type { PolicyKind } from "../policies.ts";

/*
 * The Redis side of the four algorithms: Lua that mirrors algorithms.ts operation for operation
 * (same integer µs, same expressions in the same order, so doubles round identically) and
 * returns the same flat result. Runs on vanilla Redis 7 and Valkey: no shebang flags, only
 * GET/SET (PX, KEEPTTL)/INCRBY/LINDEX/LLEN/LPOP/RPUSH/LTRIM/PEXPIRE/DEL/TIME.
 *
 * Calling convention of every script (every argument costs Redis about 1,000 instructions, so
 * there are few):
 *   KEYS[p]   the key of policy p (`prefix{identifier}`, then `:1`, `:2`...)
 *   ARGV[1]   the cost to consume; "0" to peek (cost 1, charges nothing); minus the cost to refund
 *   single-policy scripts: ARGV[2] limit, ARGV[3] parameter
 *   multi-policy script: per policy p, from ARGV[p * 3 - 1]: kind letter, limit, parameter
 *   (parameter: token bucket µs per token; window kinds window in ms)
 *   last, optional: now in integer µs; absent, the script reads the server's clock (TIME)
 * Result: `{allowed, per policy: allowed, remaining, resetAt ms, retryAfterMs}`, every value an
 * integer (Redis truncates Lua numbers); refunds return 0.
 *
 * State, one key per policy, each with a TTL of exactly the time its state still matters:
 *   token bucket   integer: minus the theoretical arrival time (µs); negative, unlike every other kind's
 *   fixed window   integer: count * 2^20 + (window index mod 2^20)
 *   sliding window string "index:current:previous"
 *   sliding log    list of µs timestamps, oldest first
 *
 * Speed (every decision runs the whole script): no function is defined per call — each kind is a
 * fragment of straight-line code, pasted into its single-policy script and into the branches of
 * the multi-policy loop. Fragments share the names k (key), L (limit), P (parameter), cost, now,
 * out and i (this policy's offset in out); eval sets ok and hands commit its state in a..e.
 * ARGV strings become numbers by arithmetic coercion (x + 0: cheaper than a tonumber call).
 * Numbers go to redis.call as strings, written with fmt("%d") (exact up to 2^63): a number
 * argument would cost more (Redis 7.0 prints it with %.17g) and is not exact everywhere (Redis
 * 7.2.0-7.2.4 print 100000000 as 1e+08; Lua's own tostring rounds past 14 digits). A GET or
 * LINDEX through redis.pcall turns a key of another type (state of another kind of policy,
 * after a limiter was reconfigured under the same prefix) into a table, which reads as absent
 * and is overwritten.
 */

/** Reads cost (refund: whether to refund it; charge: whether to consume it) and now (µs). */
const prelude = (nowAt: string): string => `local floor, ceil, max, fmt = math.floor, math.ceil, math.max, string.format
local cost, now = ARGV[1] + 0, ARGV[${nowAt}]
local refund, charge = cost < 0, cost > 0
if refund then cost = -cost elseif not charge then cost = 1 end
if now then
  now = now + 0
else
  local t = redis.call("TIME")
  now = t[1] * 1000000 + t[2]
end
local ok, a, b, c, d, e
`;

/** The three fragments of a kind: decide (sets ok, a..e), commit (reads a..e), refund. */
interface Fragments {
  readonly eval: string;
  readonly commit: string;
  readonly refund: string;
}

/**
 * Token bucket (GCRA). Parameter: µs per token. Carried from eval to commit: a = new tat. Stored
 * negated: every other kind's integer is >= 0, so none can pass for an arrival time (nor one for
 * a fixed-window count) after a limiter changes kind under the same prefix.
 */
const TOKEN_BUCKET: Fragments = {
  eval: `local tat = -(tonumber(redis.pcall("GET", k)) or 0)
if tat < now then tat = now end
local tau, nxt = L * P, tat + cost * P
ok = cost <= L and nxt - now <= tau
out[i], out[i + 1], out[i + 2] = ok and 1 or 0, max(0, floor((tau - (tat - now)) / P)), ceil(tat / 1000)
if ok then out[i + 3] = 0 elseif cost > L then out[i + 3] = -1 else out[i + 3] = ceil((nxt - tau - now) / 1000) end
a = nxt
`,
  commit: `redis.call("SET", k, fmt("%d", -a), "PX", fmt("%d", max(1, ceil((a - now) / 1000))))
out[i + 1], out[i + 2] = floor((L * P - (a - now)) / P), ceil(a / 1000)
`,
  refund: `local tat = -(tonumber(redis.pcall("GET", k)) or 0)
if tat > now then
  tat = max(now, tat - cost * P)
  redis.call("SET", k, fmt("%d", -tat), "PX", fmt("%d", max(1, ceil((tat - now) / 1000))))
end
`,
};

/**
 * Fixed window. Parameter: window ms. The stored window index is kept modulo 2^20 beside the
 * count in one integer (Redis int-encodes it); indexes compare by modular difference, so a
 * clock stepping back stays in the stored window, as in algorithms.ts. Read: index, count, and
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
const FIXED_WINDOW: Fragments = /* @__PURE__ */ (() => ({
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
out[i + 1] = L - b
`,
  refund: `${FW_READ}if c then redis.call("SET", k, fmt("%d", max(0, count - cost) * 1048576 + index % 1048576), "PX", fmt("%d", max(1, ceil(((index + 1) * size - now) / 1000)))) end
`,
}))(); // pure: fragments built from a shared part; bundles without Redis drop them

/**
 * Sliding-window counter. Parameter: window ms. Read: index, cur, prev, v (the raw GET: false
 * when absent) and d = whether the stored state is that window's.
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
const SLIDING_WINDOW: Fragments = /* @__PURE__ */ (() => ({
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
out[i + 1], out[i + 2] = max(0, floor((e - b * P) / P)), a * P + 2 * P
`,
  refund: `${SW_READ}if v then
  local f = math.min(cur, cost)
  redis.call("SET", k, fmt("%d:%d:%d", index, cur - f, max(0, prev - (cost - f))), "PX", fmt("%d", max(1, ceil(((index + 2) * P * 1000 - now) / 1000))))
end
`,
}))(); // pure: fragments built from a shared part; bundles without Redis drop them

/** Sliding log. Parameter: window ms. Carried from eval to commit: a = at, b = count. */
const SLIDING_LOG: Fragments = {
  eval: `local size, last = P * 1000, redis.pcall("LINDEX", k, "-1")
if type(last) == "table" then
  redis.call("DEL", k)
  last = nil
else
  last = tonumber(last)
end
local at, count = now, 0
if last then
  if last > now then at = last end
  local cutoff = at - size
  if last <= cutoff then
    redis.call("DEL", k)
  else
    local first = tonumber(redis.call("LINDEX", k, "0"))
    while first <= cutoff do
      redis.call("LPOP", k)
      first = tonumber(redis.call("LINDEX", k, "0"))
    end
    count = redis.call("LLEN", k)
  end
end
ok = count + cost <= L
out[i], out[i + 1] = ok and 1 or 0, max(0, L - count)
if count > 0 then out[i + 2] = ceil((last + size) / 1000) else out[i + 2] = ceil(now / 1000) end
if ok then out[i + 3] = 0 elseif cost > L then out[i + 3] = -1 else
  out[i + 3] = ceil((tonumber(redis.call("LINDEX", k, fmt("%d", count + cost - L - 1))) + size - now) / 1000)
end
a, b = at, count
`,
  commit: `local v = fmt("%d", a)
if cost == 1 then
  redis.call("RPUSH", k, v)
else
  local batch, left = {}, cost
  for n = 1, math.min(cost, 512) do batch[n] = v end
  while left > 0 do
    if left < #batch then
      for n = left + 1, #batch do batch[n] = nil end
    end
    redis.call("RPUSH", k, unpack(batch))
    left = left - #batch
  end
end
redis.call("PEXPIRE", k, fmt("%d", max(1, ceil((a + P * 1000 - now) / 1000))))
out[i + 1], out[i + 2] = L - (b + cost), ceil((a + P * 1000) / 1000)
`,
  refund: `local n = redis.pcall("LLEN", k)
if type(n) == "number" and n > 0 then
  if cost >= n then
    redis.call("DEL", k)
  else
    redis.call("LTRIM", k, "0", fmt("%d", n - cost - 1))
    local x = tonumber(redis.call("LINDEX", k, "-1")) + P * 1000 - now
    if x <= 0 then redis.call("DEL", k) else redis.call("PEXPIRE", k, fmt("%d", max(1, ceil(x / 1000)))) end
  end
end
`,
};

/** One letter per kind: the multi-policy script dispatches on it. */
export const KIND_CODE: Readonly<Record<PolicyKind, string>> = {
  "token-bucket": "t",
  "fixed-window": "f",
  "sliding-window": "s",
  "sliding-log": "l",
};

const FRAGMENTS: Readonly<Record<PolicyKind, Fragments>> = {
  "token-bucket": TOKEN_BUCKET,
  "fixed-window": FIXED_WINDOW,
  "sliding-window": SLIDING_WINDOW,
  "sliding-log": SLIDING_LOG,
};

function singleScript(kind: PolicyKind): string {
  const f = FRAGMENTS[kind];
  return `${prelude("4")}local k, L, P = KEYS[1], ARGV[2] + 0, ARGV[3] + 0
if refund then
${f.refund}return 0
end
local out, i = {0, 0, 0, 0, 0}, 2
${f.eval}if ok then
out[1] = 1
if charge then
${f.commit}end
end
return out
`;
}

/** `if kind == "t" then <t's fragment> elseif ... end` over the four kinds. */
function dispatch(part: keyof Fragments): string {
  const branches = (Object.keys(KIND_CODE) as PolicyKind[]).map((kind) => `kind == "${KIND_CODE[kind]}" then\n${FRAGMENTS[kind][part]}`);
  return `if ${branches.join("elseif ")}end\n`;
}

const POLICY = `local k, i, x, y = KEYS[p], p * 4 - 2, p * 3 - 1, p * 5
local kind, L, P = ARGV[x], ARGV[x + 1] + 0, ARGV[x + 2] + 0
`;

function multiScript(): string {
  return `${prelude("#KEYS * 3 + 2")}local out, h = {1}, {}
for p = 1, #KEYS do
${POLICY}if refund then
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
  "token-bucket": "f8e6b844222773c9e02d684c4f3c8704a3dae78c",
  "fixed-window": "0100ef57a72f72d6664f8f12d74dc1f72f70dcfc",
  "sliding-window": "1111337b1e4e609243a0f0dccb04350b50f57b65",
  "sliding-log": "13a2e8f275ee717b7586a3efdbe459fd503eca0f",
  multi: "0abdca25362b45479e2691ac4a090a35f84da816",
};

let scripts: Record<PolicyKind | "multi", LuaScript> | undefined;

/** The five scripts, built on first use (nothing runs at import time). */
export function luaScripts(): Readonly<Record<PolicyKind | "multi", LuaScript>> {
  return (scripts ??= {
    "token-bucket": { source: singleScript("token-bucket"), sha: SCRIPT_SHA["token-bucket"] },
    "fixed-window": { source: singleScript("fixed-window"), sha: SCRIPT_SHA["fixed-window"] },
    "sliding-window": { source: singleScript("sliding-window"), sha: SCRIPT_SHA["sliding-window"] },
    "sliding-log": { source: singleScript("sliding-log"), sha: SCRIPT_SHA["sliding-log"] },
    multi: { source: multiScript(), sha: SCRIPT_SHA.multi },
  });
}
