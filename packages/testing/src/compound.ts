import { describe, expect, it } from "vitest";
import { createCompoundLimiter, createRateLimiter, fixedWindow, slidingLog, tokenBucket } from "@floodgate/core";
import { type ContractContext, hourly, kindsOf, uniquePrefix } from "./support.ts";

/**
 * Compound decisions over the store: every dimension admits and is charged, or none is. A store
 * with `consumeMany` is held to its contract (one step, each pair's answer as `consume` gives
 * it); a store without it serves compound limiters all the same, one dimension at a time.
 */
export function compoundTests(ctx: ContractContext): void {
  describe("compound decisions", () => {
    it("several dimensions on the store: charged together, refused together, refunded into each charge", async () => {
      const prefix = uniquePrefix();
      const KINDS = kindsOf(ctx);
      const dims = Object.fromEntries(
        KINDS.map((kind, i) => [`d${i}`, createRateLimiter({ policy: hourly(kind, 2 + i), store: ctx.server, prefix: `${prefix}${i}:` })]),
      );
      const q = createCompoundLimiter({ dimensions: dims });
      const keys = Object.fromEntries(KINDS.map((_, i) => [`d${i}`, `k${i}`]));
      const first = await q.limit(keys);
      expect(first.allowed).toBe(true);
      expect(first.dimension).toBe("d0");
      const second = await q.limit(keys);
      expect(second.allowed).toBe(true);
      const third = await q.limit(keys);
      expect(third.allowed).toBe(false);
      expect(third.dimension).toBe("d0");
      expect(third.charge).toBeUndefined();
      // The refusal charged none of the others.
      const peek = await q.peek(keys);
      expect(Object.values(peek.dimensions).map((d) => d.remaining)).toEqual(KINDS.map((_, i) => i));
      await q.refund(second.charge!);
      expect((await q.peek(keys)).dimensions[`d${KINDS.length - 1}`]!.remaining).toBe(KINDS.length);
    });

    it("consumeMany, where the store has it: one step over every pair, each answered as consume answers", async () => {
      const store = ctx.local;
      if (typeof store.consumeMany !== "function") return;
      const prefix = uniquePrefix();
      const t = 1_700_000_000_000;
      const sets = [
        { prefix: `${prefix}a:`, policies: [fixedWindow({ limit: 2, window: "1h" })] },
        { prefix: `${prefix}b:`, policies: [tokenBucket({ capacity: 3, refillRate: 1 }), slidingLog({ limit: 5, window: "1h" })] },
      ];
      const calls = [{ set: sets[0]!, key: "x" }, { set: sets[1]!, key: "y" }];
      const admitted = await store.consumeMany(calls, 1, t);
      if (admitted === undefined) return; // keys that cannot share one step where this store runs
      expect(admitted.map((r) => r[0])).toEqual([1, 1]);
      expect(admitted[0]!.length).toBe(1 + 4 + 1); // figures, then the charge's mark
      expect(admitted[1]!.length).toBe(1 + 8 + 2);
      const both = await store.consumeMany(calls, 2, t);
      // The window has 1 left: refused; the bucket and the log would admit, but charge nothing.
      expect(both!.map((r) => r[0])).toEqual([0, 1]);
      expect(both!.every((r, i) => r.length === 1 + 4 * sets[i]!.policies.length)).toBe(true);
      expect((await store.peek(sets[1]!, "y", t))[2]).toBe(2);
      await store.refund(sets[1]!, "y", 1, t, admitted[1]!.slice(9));
      expect((await store.peek(sets[1]!, "y", t))[2]).toBe(3);
    });
  });
}
