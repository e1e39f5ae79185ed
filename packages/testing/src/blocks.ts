import { describe, expect, it } from "vitest";
import type { Policy } from "@floodgate/core";
import { type ContractContext, kindsOf, type Timed, timedLimiter, windowed, WINDOWED_KINDS } from "./support.ts";

/** Per kind taking any window (a calendar window's blocks: test/core/calendar-window.test.ts): a policy's block, block() and unblock(), penalty(), and blocks with reservations. */
export function blockTests(ctx: ContractContext): void {
  describe.each(kindsOf(ctx, WINDOWED_KINDS))("%s: blocks and penalties", (kind) => {
    /** A limiter on injected time over `policy`. */
    const timed = (policy: Policy | Policy[]): Timed => timedLimiter(ctx.local, policy);

    it("a policy's block keeps the key denied after its first denial, whatever the algorithm says", async () => {
      const { limiter, at } = timed(windowed(kind, 2, 10_000, "p", { block: "1m" }));
      expect((await limiter.limit("k")).allowed).toBe(true);
      expect((await limiter.limit("k")).allowed).toBe(true);
      const denied = await limiter.limit("k");
      expect(denied.allowed).toBe(false);
      expect(denied.retryAfterMs).toBe(60_000);
      expect(denied.remaining).toBe(0);
      expect(denied.resetAt).toBeGreaterThanOrEqual(1_700_000_060_000);
      expect(denied.charge).toBeUndefined();
      at(30_000); // the algorithm alone would admit again
      const blocked = await limiter.limit("k");
      expect(blocked.allowed).toBe(false);
      expect(blocked.retryAfterMs).toBe(30_000); // a blocked request does not extend the block
      expect((await limiter.peek("k")).retryAfterMs).toBe(30_000);
      expect((await limiter.limit("other")).allowed).toBe(true);
      at(60_000);
      const after = await limiter.limit("k");
      expect(after.allowed).toBe(true);
      expect(after.remaining).toBe(1); // nothing was charged while blocked
    });

    it("a cost above the limit blocks too; reset lifts a block", async () => {
      const { limiter } = timed(windowed(kind, 2, 10_000, "p", { block: "1h" }));
      const never = await limiter.limit("k", { cost: 3 });
      expect(never.allowed).toBe(false);
      expect(never.retryAfterMs).toBe(Infinity);
      const blocked = await limiter.limit("k");
      expect(blocked.allowed).toBe(false);
      expect(blocked.retryAfterMs).toBe(3_600_000);
      await limiter.reset("k");
      expect((await limiter.limit("k")).remaining).toBe(1);
    });

    it("block() on a single policy: every charge denied until the block ends, none of them counted", async () => {
      const { limiter, at } = timed(windowed(kind, 5, 60_000, "p"));
      await limiter.limit("k");
      await limiter.limit("k", { cost: 2 });
      await limiter.block("k", "10s");
      for (const cost of [1, 2, 1]) {
        const d = await limiter.limit("k", { cost });
        expect(d.allowed).toBe(false);
        expect(d.retryAfterMs).toBe(10_000);
      }
      at(10_000);
      expect((await limiter.limit("k")).remaining).toBe(1);
    });

    it("block() holds on a key whose state has run out and on a key never charged", async () => {
      const { limiter, at } = timed(windowed(kind, 5, 1_000, "p"));
      await limiter.limit("k");
      await limiter.block("k", "1m");
      await limiter.block("never", "1m");
      at(30_000); // long after the charge stopped mattering
      for (const key of ["k", "never"]) {
        const d = await limiter.limit(key);
        expect(d.allowed).toBe(false);
        expect(d.retryAfterMs).toBe(30_000);
      }
      at(60_000);
      for (const key of ["k", "never"]) expect((await limiter.limit(key)).remaining).toBe(4);
    });

    it("block() and unblock(): a manual ban on any policy set, the counters kept", async () => {
      const { limiter, at } = timed([windowed(kind, 5, 10_000, "a"), windowed("fixed-window", 9, 60_000, "b")]);
      await limiter.limit("k");
      await limiter.block("k", "20s");
      await limiter.block("fresh", 20_000);
      for (const key of ["k", "fresh"]) {
        const d = await limiter.limit(key);
        expect(d.allowed).toBe(false);
        expect(d.retryAfterMs).toBe(20_000);
        expect(d.policies.map((p) => [p.allowed, p.remaining])).toEqual([[false, 0], [false, 0]]);
      }
      await limiter.unblock("k");
      expect((await limiter.limit("k")).policies.map((p) => p.remaining)).toEqual([3, 7]);
      at(20_000);
      expect((await limiter.limit("fresh")).policies.map((p) => p.remaining)).toEqual([4, 8]);
    });

    it("penalty() charges unconditionally, saturating at full", async () => {
      const { limiter, at } = timed([windowed(kind, 5, 10_000, "a"), windowed("fixed-window", 20, 60_000, "b")]);
      await limiter.penalty("k", { cost: 3 });
      expect((await limiter.peek("k")).policies.map((p) => p.remaining)).toEqual([2, 17]);
      await limiter.penalty("k", { cost: 10 }); // 2 left in the first, 17 in the second
      const full = await limiter.peek("k");
      expect(full.allowed).toBe(false);
      expect(full.policies.map((p) => p.remaining)).toEqual([0, 7]);
      expect(full.retryAfterMs).toBeGreaterThan(0);
      await limiter.penalty("k"); // nothing left to take in the first: no error, no change there
      expect((await limiter.peek("k")).policies.map((p) => p.remaining)).toEqual([0, 6]);
      at(20_000); // the state recovers as the algorithm recovers it
      expect((await limiter.limit("k")).allowed).toBe(true);
    });

    it("a penalty brings on the block of a blocking policy at the next denial", async () => {
      const { limiter } = timed(windowed(kind, 3, 10_000, "p", { block: "5m" }));
      await limiter.penalty("k", { cost: 3 });
      expect((await limiter.limit("k")).retryAfterMs).toBe(300_000);
    });

    if (ctx.options.reservations !== false) {
      it("reservations and blocks: a denied reservation blocks the key, a blocked key reserves nothing", async () => {
        const { limiter, at } = timed([windowed(kind, 2, 10_000, "p", { block: "1m" }), windowed("fixed-window", 50, 3_600_000, "h")]);
        const first = await limiter.reserve("k", { estimate: 2 });
        expect(first.decision.allowed).toBe(true);
        const denied = await limiter.reserve("k");
        expect(denied.decision.allowed).toBe(false);
        expect(denied.decision.retryAfterMs).toBe(60_000);
        expect(await denied.settle(5)).toBe(false); // a denial reserved nothing to settle
        await first.cancel(); // the units come back, the block stays
        at(30_000);
        const blocked = await limiter.reserve("k");
        expect(blocked.decision.allowed).toBe(false);
        expect(blocked.decision.retryAfterMs).toBe(30_000);
        at(60_000);
        const after = await limiter.reserve("k");
        expect(after.decision.allowed).toBe(true);
        // Nothing was charged by the denials: the cancelled 2 came back, only this 1 is held.
        expect(after.decision.policies.map((p) => p.remaining)).toEqual([1, 49]);
      });
    }
  });
}
