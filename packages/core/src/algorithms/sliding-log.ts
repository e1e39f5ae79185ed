import type { Policy } from "../policy.ts";
import {
  type Algorithm,
  type AlgorithmDefinition,
  type AlgorithmTraits,
  ceilMs,
  type LuaAlgorithm,
  NEVER,
  settleByDifference,
  settleFragment,
} from "./algorithm.ts";
import { windowExample, windowPolicy, type WindowPolicyOptions } from "./window-options.ts";

/** Never leased: it writes an entry per unit anyway, so a lease would save no write. */
const SLIDING_LOG_TRAITS: AlgorithmTraits = { lease: undefined, holdsUnits: false, cachesDenials: true };

/**
 * Sliding log: one µs timestamp per admitted cost unit, oldest first, kept in a ring so that
 * entries leaving the window are dropped by moving the head, never by shifting the array. The
 * state is [log reference (the store's), head, count]; the log's length is the ring's
 * capacity and entry k (0 = oldest) sits at (head + k) mod capacity. The ring grows, doubling and
 * never beyond the limit, only when an admission does not fit.
 */
export const SLIDING_LOG: Algorithm = {
  traits: SLIDING_LOG_TRAITS,
  width: 3,
  keepsLog: true,
  apply(p, s, o, log, now, cost, out, i, charge) {
    const entries = log!;
    const size = p.windowMs * 1000;
    const limit = p.limit;
    const capacity = entries.length;
    let head = s[o + 1]!;
    let count = s[o + 2]!;
    // Entries only grow, so a later `at` never lands before the newest one (clock steps back).
    const at = count > 0 ? Math.max(now, entries[ringIndex(head, count - 1, capacity)]!) : now;
    // Drop the entries that have left the window ending at `at` (on every call, as the Lua does).
    while (count > 0 && entries[head]! <= at - size) {
      head = head + 1 === capacity ? 0 : head + 1;
      count--;
    }
    s[o + 1] = head;
    s[o + 2] = count;
    if (count + cost <= limit) {
      out[i] = 1;
      out[i + 3] = 0;
      if (charge) {
        if (count + cost > capacity) {
          growRing(entries, head, Math.min(limit, Math.max(count + cost, 2 * capacity, GROWN_RING)));
          s[o + 1] = head = 0;
        }
        for (let k = 0; k < cost; k++) entries[ringIndex(head, count + k, entries.length)] = at;
        s[o + 2] = count + cost;
        out[i + 1] = limit - count - cost;
        out[i + 2] = ceilMs(at + size);
        return at + size;
      }
    } else {
      out[i] = 0;
      out[i + 3] = cost > limit ? NEVER : ceilMs(entries[ringIndex(head, count + cost - limit - 1, capacity)]! + size - now);
    }
    out[i + 1] = Math.max(0, limit - count);
    out[i + 2] = count > 0 ? ceilMs(entries[ringIndex(head, count - 1, capacity)]! + size) : ceilMs(now);
    return at + size;
  },
  mark: (_p, s, o, log) => log![ringIndex(s[o + 1]!, s[o + 2]! - 1, log!.length)]!,
  // The mark is the timestamp the charge wrote, `cost` times. Removing up to `cost` entries
  // equal to it removes the request's own entries (or others' of the very same µs, which are
  // indistinguishable), never another time's; once they have left the window there is none.
  refund: refundLog,
  settle: /* @__PURE__ */ settleByDifference(refundLog, overchargeLog),
  accepts(s, o, log) {
    const head = s[o + 1]!;
    const count = s[o + 2]!;
    const capacity = log!.length;
    if (!Number.isInteger(head) || !Number.isInteger(count) || count < 0 || count > capacity) return false;
    if (capacity === 0) return head === 0;
    if (head < 0 || head >= capacity) return false;
    // Oldest first: the window's drop loop and the retry time rely on it.
    for (let k = 1; k < count; k++) if (log![ringIndex(head, k, capacity)]! < log![ringIndex(head, k - 1, capacity)]!) return false;
    return true;
  },
};

/** A sliding log's refund: into the mark's entries, or the newest entries without one. */
export function refundLog(
  p: Policy,
  s: Float64Array,
  o: number,
  log: number[] | undefined,
  _now: number,
  cost: number,
  mark: number | undefined,
): number {
  if (mark !== undefined) return removeEntries(p, s, o, log!, cost, mark);
  // The newest entries go first.
  const count = Math.max(0, s[o + 2]! - cost);
  s[o + 2] = count;
  return count > 0 ? log![ringIndex(s[o + 1]!, count - 1, log!.length)]! + p.windowMs * 1000 : 0;
}

/**
 * An overcharge: `cost` more entries of the mark's timestamp, beside the request's own, while
 * that timestamp is still in the window and one of its entries is still logged; never more than
 * `2 × limit` entries in all (reservations outstanding give back at most `limit`, so the log
 * stays at or above the limit whatever they give back, as it would with every entry).
 */
function overchargeLog(p: Policy, s: Float64Array, o: number, log: number[] | undefined, now: number, cost: number, mark: number): number {
  const entries = log!;
  const size = p.windowMs * 1000;
  const head = s[o + 1]!;
  const count = s[o + 2]!;
  const add = Math.min(cost, 2 * p.limit - count);
  if (mark > now - size && add > 0) {
    const all: number[] = [];
    let at = -1;
    for (let k = 0; k < count; k++) {
      const entry = entries[ringIndex(head, k, entries.length)]!;
      all.push(entry);
      if (entry === mark && at < 0) at = k + 1;
    }
    if (at > 0) {
      all.splice(at, 0, ...new Array<number>(add).fill(mark));
      while (entries.length < all.length) entries.push(0);
      for (let k = 0; k < all.length; k++) entries[k] = all[k]!;
      s[o + 1] = 0;
      s[o + 2] = all.length;
    }
  }
  const n = s[o + 2]!;
  return n > 0 ? entries[ringIndex(s[o + 1]!, n - 1, entries.length)]! + size : 0;
}

/** Removes up to `cost` entries equal to `mark` (the newest of them first, as Redis's `LREM key -cost`); returns the expiry in µs. */
export function removeEntries(p: Policy, s: Float64Array, o: number, entries: number[], cost: number, mark: number): number {
  const capacity = entries.length;
  const head = s[o + 1]!;
  const count = s[o + 2]!;
  const kept: number[] = [];
  let left = cost;
  for (let k = count - 1; k >= 0; k--) {
    const entry = entries[ringIndex(head, k, capacity)]!;
    if (entry === mark && left > 0) left--;
    else kept.push(entry);
  }
  if (left < cost) {
    // Rewritten oldest first from slot 0: the ring keeps its capacity.
    kept.reverse();
    for (let k = 0; k < kept.length; k++) entries[k] = kept[k]!;
    s[o + 1] = 0;
    s[o + 2] = kept.length;
  }
  const n = s[o + 2]!;
  return n > 0 ? entries[ringIndex(s[o + 1]!, n - 1, capacity)]! + p.windowMs * 1000 : 0;
}

/**
 * Smallest capacity of a grown ring: the first push into an empty array makes V8 reserve 17 slots
 * anyway, so growing to 16 at once costs no memory and spares a key with a handful of entries a
 * growth per admission (a growth rotates and pushes).
 */
const GROWN_RING = 16;

/** Where entry `k` (0 = oldest) of a ring starting at `head` sits; `k` is below the capacity. */
function ringIndex(head: number, k: number, capacity: number): number {
  return head + k < capacity ? head + k : head + k - capacity;
}

/**
 * Rotates a ring so that its oldest entry (at `head`) comes first, then extends it to `capacity`
 * slots. In place: the store holds the array. Only when an admission does not fit.
 */
function growRing(entries: number[], head: number, capacity: number): void {
  if (head > 0) { for (const entry of entries.splice(0, head)) entries.push(entry); }
  while (entries.length < capacity) entries.push(0);
}

/**
 * A sliding log: one timestamp per admitted request (per cost unit); exact — never more than
 * `limit` in any window-long interval — at a memory cost proportional to `limit`. `resetAt` is
 * when the newest logged request leaves the window.
 *
 * @example
 * const login = slidingLog({ limit: 5, window: "1m" });
 */
export function slidingLog(options: WindowPolicyOptions): Policy {
  return windowPolicy("sliding-log", SLIDING_LOG, "slidingLog()", options);
}

/**
 * Sliding log in Lua. Redis state: a list of µs timestamps, oldest first. Parameter: window ms.
 * Carried from eval to commit: a = at, b = count. The entries that left the window are found by
 * galloping then bisecting from the oldest (the newest is still in the window) and dropped with
 * one LTRIM: a call's work grows with the log of how many expire at once, not with their number.
 */
export const SLIDING_LOG_LUA: LuaAlgorithm = {
  code: "l",
  parameter: (p) => p.windowMs,
  fragments: {
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
    count = redis.call("LLEN", k)
    if tonumber(redis.call("LINDEX", k, "0")) <= cutoff then
      local lo, hi = 0, 1
      while tonumber(redis.call("LINDEX", k, fmt("%d", hi))) <= cutoff do lo, hi = hi, math.min(hi * 2, count - 1) end
      while hi - lo > 1 do
        local mid = floor((lo + hi) / 2)
        if tonumber(redis.call("LINDEX", k, fmt("%d", mid))) <= cutoff then lo = mid else hi = mid end
      end
      redis.call("LTRIM", k, fmt("%d", hi), "-1")
      count = count - hi
    end
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
out[i + 1], out[i + 2], out[j] = L - (b + cost), ceil((a + P * 1000) / 1000), a
`,
    // New entries go beside the mark's first one (LINSERT), the list stays oldest first; when
    // the mark is the newest entry, they are pushed at the end.
    settle: /* @__PURE__ */ settleFragment(
      `redis.pcall("LREM", k, fmt("%d", -cost), fmt("%d", m))
`,
      `local n, v = redis.pcall("LLEN", k), fmt("%d", m)
if type(n) == "number" and n > 0 and m > now - P * 1000 then
  local add = math.min(cost, 2 * L - n)
  if add > 0 and tonumber(redis.call("LINDEX", k, "-1")) == m then
    while add > 0 do
      local batch = {}
      for x = 1, math.min(add, 512) do batch[x] = v end
      redis.call("RPUSH", k, unpack(batch))
      add = add - #batch
    end
  elseif add > 0 and redis.call("LINSERT", k, "AFTER", v, v) > 0 then
    for x = 2, add do redis.call("LINSERT", k, "AFTER", v, v) end
  end
end
`,
    ),
    // A list left empty is deleted by Redis; the TTL, set by the newest entry, may stay longer.
    refund: `if m then
  redis.pcall("LREM", k, fmt("%d", -cost), fmt("%d", m))
else
local n = redis.pcall("LLEN", k)
if type(n) == "number" and n > 0 then
  if cost >= n then
    redis.call("DEL", k)
  else
    redis.call("LTRIM", k, "0", fmt("%d", n - cost - 1))
    local x = tonumber(redis.call("LINDEX", k, "-1")) + P * 1000 - now
    if x <= 0 then redis.call("DEL", k) else redis.call("PEXPIRE", k, fmt("%d", max(1, ceil(x / 1000)))) end
  end
end
end
`,
  },
};

export const SLIDING_LOG_DEFINITION: AlgorithmDefinition<"sliding-log"> = {
  traits: SLIDING_LOG_TRAITS,
  kind: "sliding-log",
  factoryName: "slidingLog",
  lua: SLIDING_LOG_LUA,
  docs: {
    call: "slidingLog({ limit, window })",
    statePerKey: "one timestamp per admitted unit",
    guarantee: "at most `limit` in any window-long interval, exactly",
    resetAt: "when the newest entry leaves the window",
  },
  exampleOptions: windowExample,
  retentionMs: (p) => p.windowMs,
};
