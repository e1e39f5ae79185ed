import { describe, expect, it } from "vitest";
import { concurrency, createRateLimiter, fixedWindow, tokenBucket } from "@floodgate/core";
import { type ContractContext, hourly, kindsOf, uniquePrefix } from "./support.ts";

const T0 = 1_767_225_600_000 + 30_000; // half a minute into a minute, an hour, a day

/**
 * Reservations: reserve, settle and cancel in one atomic step each, idempotent settlement,
 * denials that reserve nothing, the concurrency kind, expiry of what is never settled.
 */
export function reservationTests(ctx: ContractContext): void {
  describe("reservations", () => {
    describe.each(kindsOf(ctx))("%s", (kind) => {
      it("settle(actual) leaves the state a charge of `actual` would have; a second settle or a cancel changes nothing", async () => {
        const limiter = createRateLimiter({ policy: hourly(kind, 10), store: ctx.server, prefix: uniquePrefix() });
        for (const actual of [0, 2, 4, 7, 10]) {
          const r = await limiter.reserve(`r${actual}`, { estimate: 4 });
          expect(r.decision.allowed).toBe(true);
          expect(r.decision.remaining).toBe(6);
          expect(r.decision.charge).toBeUndefined();
          expect(r.id).toMatch(/^[A-Za-z0-9_-]{1,64}$/);
          expect(await r.settle(actual)).toBe(true);
          if (actual > 0) await limiter.limit(`twin${actual}`, { cost: actual });
          const settled = await limiter.peek(`r${actual}`);
          const twin = await limiter.peek(`twin${actual}`);
          expect([settled.allowed, settled.remaining]).toEqual([twin.allowed, twin.remaining]);
          expect(settled.remaining).toBe(actual === 10 ? 0 : 10 - actual);
          // Idempotent: the record is gone.
          expect(await r.settle(actual)).toBe(false);
          expect(await r.cancel()).toBe(false);
          expect(await limiter.settle(`r${actual}`, { id: r.id, actual: 1 })).toBe(false);
          expect((await limiter.peek(`r${actual}`)).remaining).toBe(settled.remaining);
        }
      });

      it("an actual cost above the estimate is charged past the limit: the true usage counts", async () => {
        const limiter = createRateLimiter({ policy: hourly(kind, 10), store: ctx.server, prefix: uniquePrefix() });
        const first = await limiter.reserve("over", { estimate: 2 });
        const second = await limiter.reserve("over", { estimate: 3 });
        expect(await first.settle(14)).toBe(true); // 14 + 3 reserved: 17 of 10
        expect((await limiter.peek("over")).allowed).toBe(false);
        // The second gives back all 3: the true usage (14) is still over the limit.
        expect(await second.cancel()).toBe(true);
        const after = await limiter.peek("over");
        expect(after.allowed).toBe(false);
        expect(after.remaining).toBe(0);
      });

      it("a denial reserves nothing; its settle and cancel do nothing", async () => {
        const limiter = createRateLimiter({ policy: hourly(kind, 3), store: ctx.server, prefix: uniquePrefix() });
        const held = await limiter.reserve("d", { estimate: 2 });
        const denied = await limiter.reserve("d", { estimate: 2 });
        expect(denied.decision.allowed).toBe(false);
        expect(denied.id).toBe("");
        expect(await denied.settle(0)).toBe(false);
        expect(await denied.cancel()).toBe(false);
        expect((await limiter.peek("d")).remaining).toBe(1);
        expect(await held.cancel()).toBe(true);
        expect((await limiter.peek("d")).remaining).toBe(3);
      });
    });

    it("a set with a concurrency policy reserves atomically: one unit of concurrency, the estimate elsewhere; a denial charges none", async () => {
      const limiter = createRateLimiter({
        policy: [
          concurrency({ limit: 2, timeout: "1h" }),
          fixedWindow({ limit: 100, window: "1h" }),
          tokenBucket({ capacity: 50, refillRate: 0.001 }),
        ],
        store: ctx.server,
        prefix: uniquePrefix(),
      });
      const a = await limiter.reserve("c", { estimate: 10 });
      const b = await limiter.reserve("c", { estimate: 10 });
      expect(a.decision.policies.map((p) => p.remaining)).toEqual([1, 90, 40]);
      expect(b.decision.policies.map((p) => p.remaining)).toEqual([0, 80, 30]);
      const c = await limiter.reserve("c", { estimate: 10 });
      expect(c.decision.allowed).toBe(false);
      expect(c.decision.policy).toBe("2-concurrent");
      expect((await limiter.peek("c")).policies.map((p) => p.remaining)).toEqual([0, 80, 30]);
      expect(await a.settle(15)).toBe(true);
      expect((await limiter.peek("c")).policies.map((p) => p.remaining)).toEqual([1, 75, 25]);
      expect(await a.cancel()).toBe(false);
      expect(await b.cancel()).toBe(true);
      // The bucket was granted to since b's charge (a's overcharge): b's tokens stay (the safe-refund rule).
      expect((await limiter.peek("c")).policies.map((p) => p.remaining)).toEqual([2, 85, 25]);
      await expect(limiter.limit("c")).rejects.toMatchObject({ code: "INVALID_ARGUMENT", message: expect.stringContaining("reserve(") });
    });

    it("a unit never released comes back after the concurrency timeout, not before", async () => {
      let now = T0;
      const limiter = createRateLimiter({
        policy: concurrency({ limit: 1, timeout: "10s" }),
        store: ctx.local,
        clock: () => now,
        prefix: uniquePrefix(),
      });
      const held = await limiter.reserve("t");
      expect(held.decision.allowed).toBe(true);
      now += 9_999;
      const early = await limiter.reserve("t");
      expect(early.decision.allowed).toBe(false);
      expect(early.decision.retryAfterMs).toBe(1);
      now += 1;
      expect((await limiter.reserve("t")).decision.allowed).toBe(true);
    });

    it("a reservation never settled expires after its ttl and keeps its estimate charged", async () => {
      let now = T0;
      const limiter = createRateLimiter({
        policy: fixedWindow({ limit: 10, window: "1h" }),
        store: ctx.local,
        clock: () => now,
        prefix: uniquePrefix(),
      });
      const r = await limiter.reserve("e", { estimate: 4, ttl: 50 });
      // Past the ttl on both clocks (the limiter's, and the Redis server's for a key's TTL).
      now += 1_000;
      await new Promise((resolve) => setTimeout(resolve, 120));
      expect(await r.cancel()).toBe(false);
      expect((await limiter.peek("e")).remaining).toBe(6);
    });

    it("ids are unique and survive JSON; a reservation can be settled through another limiter of the same policies and prefix", async () => {
      const prefix = uniquePrefix();
      const policy = hourly("fixed-window", 10);
      const a = createRateLimiter({ policy, store: ctx.server, prefix });
      const b = createRateLimiter({ policy, store: ctx.server, prefix });
      const ids = new Set<string>();
      for (let i = 0; i < 5; i++) ids.add((await a.reserve("j")).id);
      expect(ids.size).toBe(5);
      const r = await a.reserve("j", { estimate: 3 });
      const sent = JSON.parse(JSON.stringify({ key: r.key, id: r.id }));
      expect(await b.settle(sent.key, { id: sent.id, actual: 1 })).toBe(true);
      expect(await b.settle(sent.key, { id: sent.id, actual: 1 })).toBe(false);
      expect((await a.peek("j")).remaining).toBe(4);
    });
  });
}
