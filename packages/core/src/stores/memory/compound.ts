import { FIELDS_PER_POLICY } from "../../algorithms/algorithm.ts";
import type { ManyCall, PolicySet, RateLimitStore, StoreResult } from "../store.ts";

/*
 * The memory store's compound step (RateLimitStore.consumeMany). The store answers synchronously,
 * so no other call runs inside the step: the pairs are charged in turn and, at the first denial,
 * what this step charged goes back at once into the marks it was charged in (the same instant:
 * every kind's refund into its own fresh mark restores its state exactly, a bucket's included),
 * and the pairs after it are only evaluated. An admission, the common case, costs one pass.
 */

/** Decides `set`/`key` for the step's cost: `charge` false only evaluates (nothing stored, no block started). */
export type DecideOne = (set: PolicySet, key: string, charge: boolean) => StoreResult;

/** See the comment above. */
export function consumeAll(
  store: Pick<RateLimitStore, "refund">,
  decide: DecideOne,
  calls: readonly ManyCall[],
  cost: number,
  nowMs: number,
): StoreResult[] {
  const results: StoreResult[] = new Array(calls.length);
  for (let c = 0; c < calls.length; c++) {
    const call = calls[c]!;
    const r = results[c] = decide(call.set, call.key, true);
    if (r[0] === 1) continue;
    for (let back = 0; back < c; back++) {
      const charged = calls[back]!;
      const at = 1 + charged.set.policies.length * FIELDS_PER_POLICY;
      store.refund(charged.set, charged.key, cost, nowMs, results[back]!.slice(at));
      // Its figures as things stand, as for any pair of a refused step (nothing charged).
      results[back] = decide(charged.set, charged.key, false);
    }
    // The rest only evaluated; one that denies is decided again charging, which charges nothing
    // and starts its policies' blocks, as a denied consume does.
    for (let rest = c + 1; rest < calls.length; rest++) {
      const other = calls[rest]!;
      let e = decide(other.set, other.key, false);
      if (e[0] !== 1 && other.set.policies.some((p) => p.blockMs > 0)) e = decide(other.set, other.key, true);
      results[rest] = e;
    }
    return results;
  }
  return results;
}
