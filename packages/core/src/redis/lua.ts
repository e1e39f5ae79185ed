import type { PolicyKind } from "../policies.ts";

/*
 * The Redis side of the four algorithms: Lua that mirrors algorithms.ts operation for operation
 * (same integer µs, same expressions in the same order, so doubles round identically) and
 * returns the same flat result. Runs on vanilla Redis 7 and Valkey: no shebang flags, only
 * GET/SET (PX, KEEPTTL)/INCRBY/EXISTS/LINDEX/LLEN/LPOP/RPUSH/LTRIM/PEXPIRE/DEL/TIME.
 *
 * Calling convention of every script:
 *   KEYS[p]   the key of policy p (`prefix{identifier}:p-1`)
 *   ARGV[1]   "0" consume, "1" peek (cost 1, charges nothing), "2" refund
 *   ARGV[2]   cost
 *   ARGV[3]   now in integer µs, or "" to read the server's clock (TIME)
 *   per policy p, from ARGV[4 + (p - 1) * 3]: kind letter, limit, parameter
 *     (token bucket: µs per token; window kinds: window in ms)
 * Result: `{allowed, per policy: allowed, remaining, resetAt ms, retryAfterMs}`, every value an
 * integer (Redis truncates Lua numbers); refunds return 0.
 *
 * State, one key per policy, each with a TTL of exactly the time its state still matters:
 *   token bucket   integer string: the theoretical arrival time (µs)
 *   fixed window   integer string: count * 2^20 + (window index mod 2^20)
 *   sliding window string "index:current:previous"
 *   sliding log    list of µs timestamps, oldest first
 */

const PRELUDE = `
local op = ARGV[1]
local cost = tonumber(ARGV[2])
local now
if ARGV[3] == "" then
  local t = redis.call("TIME")
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[3])
end
local function fmt(n) return string.format("%.0f", n) end
-- A key of another type (state of another kind of policy, after a limiter was reconfigured
-- under the same prefix) reads as absent and is overwritten: start afresh, never fail.
local function get(k)
  local v = redis.pcall("GET", k)
  if type(v) == "table" then return false end
  return v
end
local function ttl(us)
  local ms = math.ceil(us / 1000)
  if ms < 1 then ms = 1 end
  return fmt(ms)
end
`;

/** Token bucket (GCRA). Parameter: µs per token. State carried from eval to commit: tat. */
const TOKEN_BUCKET = `
local function t_eval(k, limit, interval, cost, out, i)
  local tau = limit * interval
  local tat = math.max(tonumber(get(k)) or 0, now)
  local nxt = tat + cost * interval
  local fits = cost <= limit and nxt - now <= tau
  out[i] = fits and 1 or 0
  out[i + 1] = math.max(0, math.floor((tau - (tat - now)) / interval))
  out[i + 2] = math.ceil(tat / 1000)
  if fits then out[i + 3] = 0 elseif cost > limit then out[i + 3] = -1 else out[i + 3] = math.ceil((nxt - tau - now) / 1000) end
  return fits, tat
end
local function t_commit(k, limit, interval, cost, out, i, tat)
  local nxt = tat + cost * interval
  redis.call("SET", k, fmt(nxt), "PX", ttl(nxt - now))
  out[i + 1] = math.floor((limit * interval - (nxt - now)) / interval)
  out[i + 2] = math.ceil(nxt / 1000)
end
local function t_refund(k, limit, interval, cost)
  local tat = tonumber(get(k))
  if tat and tat > now then
    tat = math.max(now, tat - cost * interval)
    redis.call("SET", k, fmt(tat), "PX", ttl(tat - now))
  end
end
`;

/**
 * Fixed window. Parameter: window ms. The stored window index is kept modulo 2^20 beside the
 * count in one integer (Redis int-encodes it); indexes compare by modular difference, so a
 * clock stepping back stays in the stored window, as in algorithms.ts.
 */
const FIXED_WINDOW = `
local FW_MOD = 1048576
local function f_read(k, size)
  local cur = math.floor(now / size)
  local v = tonumber(get(k))
  if not v then return cur, 0, false end
  local count = math.floor(v / FW_MOD)
  local d = (cur - v) % FW_MOD
  if d == 0 then return cur, count, true end
  if d < FW_MOD / 2 then return cur, 0, false end
  return cur + (FW_MOD - d), count, true
end
local function f_eval(k, limit, w, cost, out, i)
  local size = w * 1000
  local index, count, stored = f_read(k, size)
  local fits = count + cost <= limit
  local wend = (index + 1) * size
  out[i] = fits and 1 or 0
  out[i + 1] = limit - count
  out[i + 2] = math.ceil(wend / 1000)
  if fits then out[i + 3] = 0 elseif cost > limit then out[i + 3] = -1 else out[i + 3] = math.ceil((wend - now) / 1000) end
  return fits, index, count, stored
end
local function f_commit(k, limit, w, cost, out, i, index, count, stored)
  count = count + cost
  if stored then
    -- Same window: the key already expires when it ends.
    redis.call("INCRBY", k, fmt(cost * FW_MOD))
  else
    redis.call("SET", k, fmt(count * FW_MOD + index % FW_MOD), "PX", ttl((index + 1) * w * 1000 - now))
  end
  out[i + 1] = limit - count
end
local function f_refund(k, limit, w, cost)
  local size = w * 1000
  local cur = math.floor(now / size)
  local v = tonumber(get(k))
  if not v then return end
  local d = (cur - v) % FW_MOD
  if d ~= 0 and d < FW_MOD / 2 then return end
  local index = cur
  if d ~= 0 then index = cur + (FW_MOD - d) end
  local count = math.max(0, math.floor(v / FW_MOD) - cost)
  redis.call("SET", k, fmt(count * FW_MOD + index % FW_MOD), "PX", ttl((index + 1) * size - now))
end
`;

/** Sliding-window counter. Parameter: window ms. */
const SLIDING_WINDOW = `
local function s_read(k, w)
  local index = math.floor(now / (w * 1000))
  local v = get(k)
  if not v then return index, 0, 0, false end
  local si, sc, sp = string.match(v, "^(-?%d+):(%d+):(%d+)$")
  si = tonumber(si)
  if not si then return index, 0, 0, false end
  if si > index then index = si end
  if si == index then return index, tonumber(sc), tonumber(sp), true end
  if si == index - 1 then return index, 0, tonumber(sc), false end
  return index, 0, 0, false
end
local function s_retry(limit, w, start, cur, prev, cost)
  local at
  if cur + cost <= limit then
    local e = math.max(0, math.ceil(w - ((limit - cur - cost) * w) / prev))
    while prev * (w - e) + (cur + cost) * w > limit * w do e = e + 1 end
    at = start + e
  else
    local e = math.max(0, math.ceil(w - ((limit - cost) * w) / cur))
    while cur * (w - e) + cost * w > limit * w do e = e + 1 end
    at = start + w + e
  end
  return math.max(1, math.ceil(at - now / 1000))
end
local function s_eval(k, limit, w, cost, out, i)
  local index, cur, prev, same = s_read(k, w)
  local start = index * w
  local elapsed = math.max(0, math.floor((now - start * 1000) / 1000))
  local budget = limit * w - prev * (w - elapsed)
  local fits = (cur + cost) * w <= budget
  out[i] = fits and 1 or 0
  out[i + 1] = math.max(0, math.floor((budget - cur * w) / w))
  if cur > 0 then out[i + 2] = start + 2 * w elseif prev > 0 then out[i + 2] = start + w else out[i + 2] = math.ceil(now / 1000) end
  if fits then out[i + 3] = 0 elseif cost > limit then out[i + 3] = -1 else out[i + 3] = s_retry(limit, w, start, cur, prev, cost) end
  return fits, index, cur, prev, same
end
local function s_commit(k, limit, w, cost, out, i, index, cur, prev, same)
  local start = index * w
  local elapsed = math.max(0, math.floor((now - start * 1000) / 1000))
  local v = fmt(index) .. ":" .. fmt(cur + cost) .. ":" .. fmt(prev)
  if same then
    -- Same window: the key already expires when both counted windows have passed.
    redis.call("SET", k, v, "KEEPTTL")
  else
    redis.call("SET", k, v, "PX", ttl((start + 2 * w) * 1000 - now))
  end
  out[i + 1] = math.max(0, math.floor((limit * w - prev * (w - elapsed) - (cur + cost) * w) / w))
  out[i + 2] = start + 2 * w
end
local function s_refund(k, limit, w, cost)
  if redis.call("EXISTS", k) == 0 then return end
  local index, cur, prev = s_read(k, w)
  local fromCurrent = math.min(cur, cost)
  redis.call("SET", k, fmt(index) .. ":" .. fmt(cur - fromCurrent) .. ":" .. fmt(math.max(0, prev - (cost - fromCurrent))), "PX", ttl((index + 2) * w * 1000 - now))
end
`;

/** Sliding log. Parameter: window ms. State carried from eval to commit: at, count. */
const SLIDING_LOG = `
local function l_eval(k, limit, w, cost, out, i)
  local size = w * 1000
  local last = redis.pcall("LINDEX", k, -1)
  if type(last) == "table" then
    -- Not a list: state of another kind of policy under this prefix. Start afresh.
    redis.call("DEL", k)
    last = nil
  else
    last = tonumber(last)
  end
  local at = now
  if last then at = math.max(now, last) end
  local cutoff = at - size
  local count = 0
  if last then
    if last <= cutoff then
      redis.call("DEL", k)
    else
      local first = tonumber(redis.call("LINDEX", k, 0))
      while first <= cutoff do
        redis.call("LPOP", k)
        first = tonumber(redis.call("LINDEX", k, 0))
      end
      count = redis.call("LLEN", k)
    end
  end
  local fits = count + cost <= limit
  out[i] = fits and 1 or 0
  out[i + 1] = limit - count
  if count > 0 then out[i + 2] = math.ceil((last + size) / 1000) else out[i + 2] = math.ceil(now / 1000) end
  if fits then out[i + 3] = 0 elseif cost > limit then out[i + 3] = -1 else
    out[i + 3] = math.ceil((tonumber(redis.call("LINDEX", k, count + cost - limit - 1)) + size - now) / 1000)
  end
  return fits, at, count
end
local function l_commit(k, limit, w, cost, out, i, at, count)
  local size = w * 1000
  local v = fmt(at)
  local batch = {}
  for n = 1, math.min(cost, 512) do batch[n] = v end
  local left = cost
  while left > 0 do
    if left < #batch then
      for n = left + 1, #batch do batch[n] = nil end
    end
    redis.call("RPUSH", k, unpack(batch))
    left = left - #batch
  end
  redis.call("PEXPIRE", k, ttl(at + size - now))
  out[i + 1] = limit - (count + cost)
  out[i + 2] = math.ceil((at + size) / 1000)
end
local function l_refund(k, limit, w, cost)
  local n = redis.pcall("LLEN", k)
  if type(n) ~= "number" or n == 0 then return end
  if cost >= n then redis.call("DEL", k) return end
  redis.call("LTRIM", k, 0, n - cost - 1)
  local last = tonumber(redis.call("LINDEX", k, -1))
  local e = last + w * 1000 - now
  if e <= 0 then redis.call("DEL", k) else redis.call("PEXPIRE", k, ttl(e)) end
end
`;

/** One letter per kind: the multi-policy script dispatches on it. */
export const KIND_CODE: Readonly<Record<PolicyKind, string>> = {
  "token-bucket": "t",
  "fixed-window": "f",
  "sliding-window": "s",
  "sliding-log": "l",
};

const FRAGMENT: Readonly<Record<PolicyKind, string>> = {
  "token-bucket": TOKEN_BUCKET,
  "fixed-window": FIXED_WINDOW,
  "sliding-window": SLIDING_WINDOW,
  "sliding-log": SLIDING_LOG,
};

function singleScript(kind: PolicyKind): string {
  const c = KIND_CODE[kind];
  return `${PRELUDE}${FRAGMENT[kind]}
local k = KEYS[1]
local limit = tonumber(ARGV[5])
local param = tonumber(ARGV[6])
if op == "2" then ${c}_refund(k, limit, param, cost) return 0 end
local out = {0, 0, 0, 0, 0}
local fits, a, b, c, d = ${c}_eval(k, limit, param, cost, out, 2)
if fits then
  out[1] = 1
  if op == "0" then ${c}_commit(k, limit, param, cost, out, 2, a, b, c, d) end
end
return out
`;
}

function multiScript(): string {
  return `${PRELUDE}${TOKEN_BUCKET}${FIXED_WINDOW}${SLIDING_WINDOW}${SLIDING_LOG}
local EVAL = { t = t_eval, f = f_eval, s = s_eval, l = l_eval }
local COMMIT = { t = t_commit, f = f_commit, s = s_commit, l = l_commit }
local REFUND = { t = t_refund, f = f_refund, s = s_refund, l = l_refund }
local n = #KEYS
if op == "2" then
  for p = 1, n do
    local j = 4 + (p - 1) * 3
    REFUND[ARGV[j]](KEYS[p], tonumber(ARGV[j + 1]), tonumber(ARGV[j + 2]), cost)
  end
  return 0
end
local out = {1}
local held = {}
for p = 1, n do
  local j = 4 + (p - 1) * 3
  local fits, a, b, c, d = EVAL[ARGV[j]](KEYS[p], tonumber(ARGV[j + 1]), tonumber(ARGV[j + 2]), cost, out, 2 + (p - 1) * 4)
  if not fits then out[1] = 0 end
  held[p] = {a, b, c, d}
end
if out[1] == 1 and op == "0" then
  for p = 1, n do
    local j = 4 + (p - 1) * 3
    local h = held[p]
    COMMIT[ARGV[j]](KEYS[p], tonumber(ARGV[j + 1]), tonumber(ARGV[j + 2]), cost, out, 2 + (p - 1) * 4, h[1], h[2], h[3], h[4])
  end
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
  "token-bucket": "9dcf3d41f96b97d723289a1b215f24d1c5004d85",
  "fixed-window": "8f10f906ab188ae839a655dd20e5d473a756866d",
  "sliding-window": "2d542e812fc82447fe6cdb6ddad5c57c1777296d",
  "sliding-log": "d938b5b72eb87c2b086a941060f6ebba3466f8e6",
  multi: "2bafed39a36d30e2db5b801a539458dfbbb0a16c",
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
