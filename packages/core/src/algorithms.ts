import type { Policy } from "./policies.ts";

/*
 * The four algorithms as pure functions over a state vector. This file is the specification the
 * Redis Lua scripts mirror operation for operation: every time is an integer number of
 * microseconds and every quantity an integer, so doubles compute them exactly in JavaScript and
 * in Lua alike and both stores reach identical decisions.
 *
 * A decision writes four numbers per policy into `out` at `i`:
 *   out[i]     1 when this policy alone would admit `cost`, else 0
 *   out[i + 1] remaining (after consuming, when charged; else as things stand)
 *   out[i + 2] resetAt, epoch ms
 *   out[i + 3] retryAfterMs: 0 when admitted, NEVER (-1) when `cost` exceeds the limit
 */

/** `retryAfterMs` sentinel in store results: the cost exceeds the policy's limit. */
export const NEVER = -1;

/** The outcome of one policy in a store result: four numbers per policy after the leading flag. */
export const FIELDS_PER_POLICY = 4;

export interface Algorithm {
  /** Numbers of state per key in the memory store. */
  readonly width: number;
  /**
   * Decides whether `cost` fits, writes this policy's four figures at `out[i]` and, when it fits
   * and `charge` is set, applies it (the figures are then those after consuming). Returns the
   * state's expiry in µs, meaningful once charged. A denial never changes the state.
   */
  apply(p: Policy, s: Float64Array, o: number, log: number[] | undefined, nowUs: number, cost: number, out: number[], i: number, charge: boolean): number;
  /** Gives back up to `cost` units, never below an empty state; returns the expiry in µs. */
  refund(p: Policy, s: Float64Array, o: number, log: number[] | undefined, nowUs: number, cost: number): number;
}

const ceilMs = (us: number): number => Math.ceil(us / 1000);

/** Token bucket as GCRA: the state is the theoretical arrival time (µs) of the next request. */
export const TOKEN_BUCKET: Algorithm = {
  width: 1,
  apply(p, s, o, _log, now, cost, out, i, charge) {
    const interval = intervalUs(p);
    const limit = p.limit;
    const tau = limit * interval;
    const tat = Math.max(s[o]!, now);
    const next = tat + cost * interval;
    if (cost <= limit && next - now <= tau) {
      out[i] = 1;
      out[i + 3] = 0;
      if (charge) {
        s[o] = next;
        out[i + 1] = Math.floor((tau - (next - now)) / interval);
        out[i + 2] = ceilMs(next);
        return next;
      }
    } else {
      out[i] = 0;
      out[i + 3] = cost > limit ? NEVER : ceilMs(next - tau - now);
    }
    // Negative only after the clock stepped back past the stored arrival time.
    out[i + 1] = Math.max(0, Math.floor((tau - (tat - now)) / interval));
    out[i + 2] = ceilMs(tat);
    return next;
  },
  refund(p, s, o, _log, now, cost) {
    const tat = s[o]!;
    if (tat > now) s[o] = Math.max(now, tat - cost * intervalUs(p));
    return s[o]!;
  },
};

/** Fixed window: [window index, count]. A window older than the stored one counts as the stored one. */
export const FIXED_WINDOW: Algorithm = {
  width: 2,
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
  refund(p, s, o, _log, now, cost) {
    const size = p.windowMs * 1000;
    if (s[o] === Math.max(Math.floor(now / size), s[o]!)) s[o + 1] = Math.max(0, s[o + 1]! - cost);
    return (s[o]! + 1) * size;
  },
};

/**
 * Sliding-window counter: [window index, current count, previous count]. The previous window
 * counts in proportion to its overlap with the sliding window, in whole milliseconds, compared
 * in integers: prev × (W − elapsed) + (cur + cost) × W ≤ limit × W.
 */
export const SLIDING_WINDOW: Algorithm = {
  width: 3,
  apply(p, s, o, _log, now, cost, out, i, charge) {
    const w = p.windowMs;
    const limit = p.limit;
    const index = Math.max(Math.floor(now / (w * 1000)), s[o]!);
    const cur = currentCount(s, o, index);
    const prev = previousCount(s, o, index);
    const start = index * w;
    const elapsed = Math.max(0, Math.floor((now - start * 1000) / 1000));
    const budget = limit * w - prev * (w - elapsed);
    if ((cur + cost) * w <= budget) {
      out[i] = 1;
      out[i + 3] = 0;
      if (charge) {
        s[o] = index;
        s[o + 1] = cur + cost;
        s[o + 2] = prev;
        out[i + 1] = Math.max(0, Math.floor((budget - (cur + cost) * w) / w));
        out[i + 2] = start + 2 * w;
        return (start + 2 * w) * 1000;
      }
    } else {
      out[i] = 0;
      out[i + 3] = cost > limit ? NEVER : slidingRetryMs(limit, w, start, cur, prev, cost, now);
    }
    out[i + 1] = Math.max(0, Math.floor((budget - cur * w) / w));
    out[i + 2] = cur > 0 ? start + 2 * w : prev > 0 ? start + w : ceilMs(now);
    return (start + 2 * w) * 1000;
  },
  refund(p, s, o, _log, now, cost) {
    const w = p.windowMs;
    const index = Math.max(Math.floor(now / (w * 1000)), s[o]!);
    const cur = currentCount(s, o, index);
    const prev = previousCount(s, o, index);
    const fromCurrent = Math.min(cur, cost);
    s[o] = index;
    s[o + 1] = cur - fromCurrent;
    s[o + 2] = Math.max(0, prev - (cost - fromCurrent));
    return (index + 2) * w * 1000;
  },
};

/** The current window's count once the state is rolled forward to window `index`. */
function currentCount(s: Float64Array, o: number, index: number): number {
  return s[o] === index ? s[o + 1]! : 0;
}

/** The previous window's count once the state is rolled forward to window `index`. */
function previousCount(s: Float64Array, o: number, index: number): number {
  if (s[o] === index) return s[o + 2]!;
  if (s[o] === index - 1) return s[o + 1]!;
  return 0;
}

/** The earliest whole millisecond at which `cost` fits, given the estimate's shape. */
function slidingRetryMs(limit: number, w: number, start: number, cur: number, prev: number, cost: number, nowUs: number): number {
  let at: number;
  if (cur + cost <= limit) {
    // Later in this window, once enough of the previous window has slid out.
    let e = Math.max(0, Math.ceil(w - ((limit - cur - cost) * w) / prev));
    while (prev * (w - e) + (cur + cost) * w > limit * w) e++;
    at = start + e;
  } else {
    // In the next window, where the current count becomes the weighted previous one.
    let e = Math.max(0, Math.ceil(w - ((limit - cost) * w) / cur));
    while (cur * (w - e) + cost * w > limit * w) e++;
    at = start + w + e;
  }
  return Math.max(1, Math.ceil(at - nowUs / 1000));
}

/**
 * Sliding log: one µs timestamp per admitted cost unit, oldest first, kept in a ring so that
 * entries leaving the window are dropped by moving the head, never by shifting the array. The
 * state is [log reference (the memory store's), head, count]; the log's length is the ring's
 * capacity and entry k (0 = oldest) sits at (head + k) mod capacity. The ring grows, doubling and
 * never beyond the limit, only when an admission does not fit.
 */
export const SLIDING_LOG: Algorithm = {
  width: 3,
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
  refund(p, s, o, log, _now, cost) {
    // The newest entries go first.
    const count = Math.max(0, s[o + 2]! - cost);
    s[o + 2] = count;
    return count > 0 ? log![ringIndex(s[o + 1]!, count - 1, log!.length)]! + p.windowMs * 1000 : 0;
  },
};

/**
 * Smallest capacity of a grown ring: the first push into an empty array makes V8 reserve 17 slots
 * anyway, so growing to 16 at once costs no memory and spares a key with a handful of entries a
 * growth per admission (a growth rotates and pushes: ~1,000 instructions).
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
  if (head > 0) for (const entry of entries.splice(0, head)) entries.push(entry);
  while (entries.length < capacity) entries.push(0);
}

/** Microseconds per token of a token bucket, an exact integer. */
export function intervalUs(p: Policy): number {
  return Math.round(p.intervalMs * 1000);
}

/**
 * Where a policy keeps its algorithm: the policy factories set it, the memory store reads it. A
 * bundle then carries only the algorithms whose factories it imports. A registered symbol, so two
 * copies of this package in one program (its ESM and CJS builds, or a bundled and an installed
 * copy) accept each other's policies.
 */
export const ALGORITHM: unique symbol = /* @__PURE__ */ Symbol.for("floodgate.alg");

/** The algorithm of a policy built by a policy factory. */
export function algorithmOf(policy: Policy): Algorithm {
  return (policy as Policy & { readonly [ALGORITHM]: Algorithm })[ALGORITHM];
}

/** Converts an epoch-ms clock reading into the integer µs the algorithms use. */
export function toMicros(nowMs: number): number {
  return Math.floor(nowMs * 1000);
}
