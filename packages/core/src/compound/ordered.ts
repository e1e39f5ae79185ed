import type { Decision, RateLimiter, Reservation } from "../limiter/types.ts";
import { dimensionOf } from "./decision.ts";
import type { DimensionDecision } from "./types.ts";

/*
 * The ordered path, for dimensions that cannot be decided in one store step (different stores, a
 * store without `consumeMany`, a Redis Cluster with keys in different slots): each dimension is
 * charged through its own atomic single-key step, in the order the dimensions were given; on the
 * first refusal, every dimension charged before it is given back exactly what it was charged
 * (a refund into its charge's marks, or a reservation cancelled), and the dimensions after it are
 * only read (peeked). No dimension ever admits what it refuses, so every bound holds; a refused
 * request holds its units in the dimensions before the refusing one from its charge until its
 * give-back lands (one store call each, sent together): docs/compound-limits.md.
 */

export interface Dimension {
  readonly name: string;
  readonly limiter: RateLimiter;
}

/** What the ordered path decided: per dimension its figures, and the charges made when all admitted. */
export interface Ordered<T> {
  readonly all: DimensionDecision[];
  readonly allowed: boolean;
  /** Per dimension what was charged (a decision, or a reservation); empty for a denial. */
  readonly held: T[];
}

/** Settles all, resolving once every one has finished (failures included): a give-back that fails leaves its units charged, never more. */
const settled = (calls: Promise<unknown>[]): Promise<unknown> => Promise.allSettled(calls);

/** The ordered path of `limit()`: each dimension's `decide`, given back by `refund` on a refusal. */
export async function limitOrdered(
  dims: readonly Dimension[],
  keys: Readonly<Record<string, string>>,
  cost: number,
): Promise<Ordered<Decision>> {
  const held: Decision[] = [];
  for (let i = 0; i < dims.length; i++) {
    const { name, limiter } = dims[i]!;
    let d: Decision;
    try {
      d = await limiter.decide(keys[name]!, { cost });
    } catch (error) {
      await settled(held.map((h, j) => dims[j]!.limiter.refund(keys[dims[j]!.name]!, { charge: h.charge! })));
      throw error;
    }
    if (d.allowed) {
      held.push(d);
      continue;
    }
    const back = held.map((h, j) => dims[j]!.limiter.refund(keys[dims[j]!.name]!, { charge: h.charge! }));
    const rest = dims.slice(i + 1).map((r) => r.limiter.peek(keys[r.name]!));
    await settled(back);
    const all = held.map((h, j) => dimensionOf(dims[j]!.name, keys[dims[j]!.name]!, h));
    all.push(dimensionOf(name, keys[name]!, d));
    const read = await Promise.all(rest);
    for (let r = 0; r < read.length; r++) all.push(dimensionOf(dims[i + 1 + r]!.name, keys[dims[i + 1 + r]!.name]!, read[r]!));
    return { all, allowed: false, held: [] };
  }
  return { all: held.map((h, j) => dimensionOf(dims[j]!.name, keys[dims[j]!.name]!, h)), allowed: true, held };
}

/** The ordered path of `reserve()`: each dimension's reservation, cancelled on a refusal. */
export async function reserveOrdered(
  dims: readonly Dimension[],
  keys: Readonly<Record<string, string>>,
  options: { estimate?: number; ttl?: number | string },
): Promise<Ordered<Reservation>> {
  const held: Reservation[] = [];
  for (let i = 0; i < dims.length; i++) {
    const { name, limiter } = dims[i]!;
    let r: Reservation;
    try {
      r = await limiter.reserve(keys[name]!, options);
    } catch (error) {
      await settled(held.map((h) => h.cancel()));
      throw error;
    }
    if (r.decision.allowed) {
      held.push(r);
      continue;
    }
    const back = held.map((h) => h.cancel());
    const rest = dims.slice(i + 1).map((d) => d.limiter.peek(keys[d.name]!));
    await settled(back);
    const all = held.map((h, j) => dimensionOf(dims[j]!.name, h.key, h.decision));
    all.push(dimensionOf(name, keys[name]!, r.decision));
    const read = await Promise.all(rest);
    for (let k = 0; k < read.length; k++) all.push(dimensionOf(dims[i + 1 + k]!.name, keys[dims[i + 1 + k]!.name]!, read[k]!));
    return { all, allowed: false, held: [] };
  }
  return { all: held.map((h, j) => dimensionOf(dims[j]!.name, h.key, h.decision)), allowed: true, held };
}
