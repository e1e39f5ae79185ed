/**
 * An independent checker of admissions: it replays what a limiter admitted, in time order,
 * through the exact algorithms written here from their definitions (not Floodgate's algorithm
 * code), and reports every admission exact mode would have refused. Leased mode must never
 * produce one; a limiter that spends first and reports later does.
 *
 * Times are integer microseconds on the store's clock (the windows are aligned to the epoch as
 * Floodgate's are). Only admissions are replayed: in exact mode a denial charges nothing.
 */

/** A policy as the checker knows it: its kind and figures, nothing of the library's objects. */
export type CheckedPolicy =
  | { readonly kind: "fixed-window"; readonly limit: number; readonly windowMs: number }
  | { readonly kind: "sliding-window"; readonly limit: number; readonly windowMs: number }
  | { readonly kind: "token-bucket"; readonly capacity: number; readonly intervalUs: number };

/** One admitted request. */
export interface Admission {
  readonly atUs: number;
  readonly cost: number;
  /** Who admitted it (for reports). */
  readonly by?: string | number;
}

/** An admission exact mode would have refused. */
export interface Violation {
  readonly index: number;
  readonly admission: Admission;
  readonly policy: number;
  readonly detail: string;
}

/** Converts a Floodgate policy's public figures into the checker's description. */
export function describePolicy(p: { kind: string; limit: number; windowMs: number; intervalMs: number }): CheckedPolicy {
  if (p.kind === "fixed-window" || p.kind === "sliding-window") return { kind: p.kind, limit: p.limit, windowMs: p.windowMs };
  if (p.kind === "token-bucket") return { kind: "token-bucket", capacity: p.limit, intervalUs: Math.round(p.intervalMs * 1000) };
  throw new Error(`the checker has no exact model of ${p.kind}`);
}

/**
 * Replays `admissions` (sorted here by time, stable) through every policy at once, as one
 * atomic set: each admission must fit every policy; it is then charged to all.
 */
export function check(policies: readonly CheckedPolicy[], admissions: readonly Admission[]): Violation[] {
  const order = admissions.map((a, index) => ({ a, index })).sort((x, y) => x.a.atUs - y.a.atUs || x.index - y.index);
  const state = policies.map(() => ({ window: -Infinity, count: 0, previous: 0, tat: -Infinity }));
  const violations: Violation[] = [];
  for (const { a, index } of order) {
    const t = a.atUs;
    // First decide for every policy, then charge all (a set admits only when all admit).
    policies.forEach((p, i) => {
      const s = state[i]!;
      if (p.kind === "fixed-window") {
        const w = Math.floor(t / (p.windowMs * 1000));
        const count = w === s.window ? s.count : 0;
        if (count + a.cost > p.limit) {
          violations.push({ index, admission: a, policy: i, detail: `window ${w}: ${count} + ${a.cost} > ${p.limit}` });
        }
      } else if (p.kind === "sliding-window") {
        const w = Math.floor(t / (p.windowMs * 1000));
        const current = w === s.window ? s.count : 0;
        const previous = w === s.window ? s.previous : w === s.window + 1 ? s.count : 0;
        // The weight of the previous window: its overlap with the sliding window, in whole ms.
        const elapsedMs = Math.floor((t - w * p.windowMs * 1000) / 1000);
        if (previous * (p.windowMs - elapsedMs) + (current + a.cost) * p.windowMs > p.limit * p.windowMs) {
          violations.push({
            index,
            admission: a,
            policy: i,
            detail: `window ${w}: ${previous} × ${p.windowMs - elapsedMs}/${p.windowMs} + ${current} + ${a.cost} > ${p.limit}`,
          });
        }
      } else {
        const tat = Math.max(s.tat, t);
        if (a.cost > p.capacity || tat + a.cost * p.intervalUs - t > p.capacity * p.intervalUs) {
          violations.push({
            index,
            admission: a,
            policy: i,
            detail: `bucket: ${(tat - t) / p.intervalUs} tokens used of ${p.capacity}, cost ${a.cost}`,
          });
        }
      }
    });
    // Charged as exact mode would have (a violation is charged too: what was admitted, counts).
    policies.forEach((p, i) => {
      const s = state[i]!;
      if (p.kind === "token-bucket") {
        s.tat = Math.max(s.tat, t) + a.cost * p.intervalUs;
        return;
      }
      const w = Math.floor(t / (p.windowMs * 1000));
      if (w !== s.window) {
        s.previous = w === s.window + 1 ? s.count : 0;
        s.count = 0;
        s.window = w;
      }
      s.count += a.cost;
    });
  }
  return violations;
}
