import { FIELDS_PER_POLICY } from "../../algorithms/algorithm.ts";
import type { ManyCall, PolicySet, RateLimitStore, StoreResult } from "../store.ts";

/*
 * The memory store's compound step (RateLimitStore.consumeMany): every pair is decided first
 * without charging, then all are charged, or none. The store answers synchronously, so no other
 * call runs between the two passes: the step is atomic as a single consume is.
 */

/** Decides `set`/`key` for the step's cost: `charge` false only evaluates (nothing stored, no block started). */
export type DecideOne = (set: PolicySet, key: string, charge: boolean) => StoreResult;

/** See the comment above. `store.refund` undoes a charge of this very step when two pairs share state. */
export function consumeAll(
  store: Pick<RateLimitStore, "refund">,
  decide: DecideOne,
  calls: readonly ManyCall[],
  cost: number,
  nowMs: number,
): StoreResult[] {
  const results: StoreResult[] = new Array(calls.length);
  let allowed = true;
  for (let c = 0; c < calls.length; c++) {
    const r = results[c] = decide(calls[c]!.set, calls[c]!.key, false);
    if (r[0] !== 1) allowed = false;
  }
  if (!allowed) {
    // A denying pair is decided again with charging on: it charges nothing, and starts its
    // policies' blocks as a denied consume does (a pair that admitted stays untouched).
    for (let c = 0; c < calls.length; c++) {
      const call = calls[c]!;
      if (results[c]![0] !== 1 && call.set.policies.some((p) => p.blockMs > 0)) results[c] = decide(call.set, call.key, true);
    }
    return results;
  }
  for (let c = 0; c < calls.length; c++) {
    const r = decide(calls[c]!.set, calls[c]!.key, true);
    if (r[0] === 1) {
      results[c] = r;
      continue;
    }
    // Only when two pairs share state (the caller keeps keys distinct): what this step charged goes back.
    for (let back = 0; back < c; back++) {
      const call = calls[back]!;
      const at = 1 + call.set.policies.length * FIELDS_PER_POLICY;
      store.refund(call.set, call.key, cost, nowMs, results[back]!.slice(at));
      results[back] = results[back]!.slice(0, at);
    }
    results[c] = r;
    return results;
  }
  return results;
}
