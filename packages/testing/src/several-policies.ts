import { describe, expect, it } from "vitest";
import { createRateLimiter, fixedWindow, slidingLog } from "@floodgate/core";
import { type ContractContext, hourly, kindsOf, uniquePrefix } from "./support.ts";

/** Several policies on one key: admitted and denied together, atomically, each refunded into its own charge. */
export function severalPolicyTests(ctx: ContractContext): void {
  describe("several policies", () => {
    it("one of every kind: admitted together, denied together", async () => {
      const policies = kindsOf(ctx).map((kind, i) => hourly(kind, 3 + i, `k${i}`));
      const limiter = createRateLimiter({ policy: policies, store: ctx.server, prefix: uniquePrefix() });
      for (let n = 0; n < 3; n++) expect((await limiter.limit("all")).allowed).toBe(true);
      const denied = await limiter.limit("all");
      expect(denied.allowed).toBe(false);
      expect(denied.policy).toBe("k0");
      expect((await limiter.peek("all")).policies.map((p) => p.remaining)).toEqual(kindsOf(ctx).map((_, i) => i));
    });

    it("are checked atomically: a denial charges none of them", async () => {
      const prefix = uniquePrefix();
      const policies = [
        hourly("token-bucket", 3, "burst"),
        hourly("fixed-window", 10, "hourly"),
        hourly("sliding-log", 10, "log"),
        hourly("sliding-window", 10, "sw"),
      ];
      const limiter = createRateLimiter({ policy: policies, store: ctx.server, prefix });
      for (let i = 0; i < 3; i++) expect((await limiter.limit("m")).allowed).toBe(true);
      for (let i = 0; i < 5; i++) {
        const d = await limiter.limit("m");
        expect(d.allowed).toBe(false);
        expect(d.policy).toBe("burst");
      }
      const peeked = await limiter.peek("m");
      expect(peeked.policies.map((p) => p.remaining)).toEqual([0, 7, 7, 7]);
      expect(peeked.policies.map((p) => p.allowed)).toEqual([false, true, true, true]);
      await limiter.refund("m", { cost: 2 });
      const after = await limiter.limit("m", { cost: 2 });
      expect(after.allowed).toBe(true);
      expect(after.policies.map((p) => p.remaining)).toEqual([0, 7, 7, 7]);
      await limiter.reset("m");
      expect((await limiter.peek("m")).policies.map((p) => p.remaining)).toEqual([3, 10, 10, 10]);
    });

    it("a late refund goes into each policy's own charge, atomically", async () => {
      const start = 1_700_000_000_000;
      let now = start;
      const limiter = createRateLimiter({
        policy: [fixedWindow({ limit: 2, window: "10s", name: "w" }), slidingLog({ limit: 3, window: "1m", name: "log" })],
        store: ctx.local,
        prefix: uniquePrefix(),
        clock: () => now,
      });
      const early = await limiter.limit("m");
      expect(early.charge?.marks).toHaveLength(2);
      now = start + 10_000;
      await limiter.limit("m");
      await limiter.refund("m", { charge: early.charge });
      // The passed window gives nothing back; the log drops the early entry, not the newest.
      expect((await limiter.peek("m")).policies.map((p) => p.remaining)).toEqual([1, 2]);
      now = start + 60_500;
      expect((await limiter.peek("m")).policies.map((p) => p.remaining)).toEqual([2, 2]);
    });

    it("report every policy's figures and bind on the longest wait", async () => {
      let now = 1_700_000_040_000; // a whole minute
      const limiter = createRateLimiter({
        policy: [fixedWindow({ limit: 2, window: "1s", name: "s" }), fixedWindow({ limit: 3, window: "1m", name: "m" })],
        store: ctx.local,
        prefix: uniquePrefix(),
        clock: () => now,
      });
      expect((await limiter.limit("x")).policy).toBe("s");
      await limiter.limit("x");
      const d = await limiter.limit("x");
      expect(d.allowed).toBe(false);
      expect(d.policy).toBe("s");
      now += 1000;
      expect((await limiter.limit("x")).allowed).toBe(true);
      const d2 = await limiter.limit("x");
      expect(d2.allowed).toBe(false);
      expect(d2.policy).toBe("m");
      expect(d2.retryAfterMs).toBe(59_000);
      expect(d2.policies.map((p) => [p.allowed, p.remaining])).toEqual([[true, 1], [false, 0]]);
    });
  });
}
