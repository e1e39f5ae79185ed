import { describe, expect, it } from "vitest";
import { createRateLimiter, fixedWindow, type Policy, slidingWindow, tokenBucket } from "@floodgate/core";
import type { LeaseRequest, PolicySet, RateLimitStore, StoreResult } from "@floodgate/core/store";
import { type ContractContext, uniquePrefix } from "./support.ts";

const T0 = 1_767_225_600_000 + 30_000; // half a minute into a minute, an hour, a day

/** One policy set on its own prefix, a way to call the store's `lease` on it, and a limiter to read it. */
function leaseBench(store: RateLimitStore, policies: Policy[]) {
  const set: PolicySet = { prefix: uniquePrefix(), policies };
  const reader = createRateLimiter({ policy: policies, store, prefix: set.prefix, clock: () => T0, resilience: false });
  const n = policies.length;
  const lease = async (
    request: Partial<LeaseRequest> & { id: string },
  ): Promise<{ result: StoreResult; granted: number; lifeUs: number }> => {
    const result = await store.lease!(set, "k", { cost: 1, want: 0, lifeMs: 5000, minLifeMs: 100, ...request }, T0);
    expect(result).toHaveLength(1 + 5 * n + 3);
    return { result, granted: result[5 * n + 1]!, lifeUs: result[5 * n + 2]! };
  };
  const remaining = async (): Promise<number[]> => (await reader.peek("k")).policies.map((p) => p.remaining);
  return { lease, remaining, reader };
}

/**
 * Leases (see docs/leases.md): one atomic call gives back what earlier leases did not spend,
 * decides the request, and charges a lease with it when every policy keeps enough; a retried call
 * charges nothing again; a return counts once; a denial grants and charges nothing; a leased
 * limiter over the store admits from its leases and never more than the limit.
 */
export function leaseTests(ctx: ContractContext): void {
  describe("leases", () => {
    it("a lease call admits the request and charges the units granted with it, on every policy", async () => {
      const { lease, remaining } = leaseBench(ctx.local, [
        fixedWindow({ limit: 100, window: "1h", name: "h" }),
        slidingWindow({ limit: 80, window: "1h", name: "s" }),
      ]);
      const { result, granted, lifeUs } = await lease({ id: "a1", want: 10 });
      expect(result[0]).toBe(1);
      expect(granted).toBe(10);
      expect(lifeUs).toBeGreaterThan(0);
      expect(lifeUs).toBeLessThanOrEqual(5_000_000);
      expect(await remaining()).toEqual([89, 69]);
    });

    it("a retried call with the same id charges nothing again and answers the same grant", async () => {
      const { lease, remaining } = leaseBench(ctx.local, [fixedWindow({ limit: 100, window: "1h" })]);
      const first = await lease({ id: "r1", want: 10 });
      const again = await lease({ id: "r1", want: 10 });
      expect(again.granted).toBe(first.granted);
      expect(await remaining()).toEqual([89]);
    });

    it("a return gives back the units not spent into what the lease was charged in, once", async () => {
      const { lease, remaining } = leaseBench(ctx.local, [fixedWindow({ limit: 100, window: "1h" })]);
      await lease({ id: "g1", want: 10 });
      expect(await remaining()).toEqual([89]);
      // A refresh that only gives back: no request, no new lease wanted.
      await lease({ id: "g2", cost: 0, want: 0, returns: [{ id: "g1", unspent: 4 }] });
      expect(await remaining()).toEqual([93]);
      await lease({ id: "g3", cost: 0, want: 0, returns: [{ id: "g1", unspent: 4 }] });
      expect(await remaining()).toEqual([93]);
      // More than was granted gives back the whole lease, not more.
      await lease({ id: "g4", want: 5 });
      await lease({ id: "g5", cost: 0, want: 0, returns: [{ id: "g4", unspent: 1_000 }] });
      expect(await remaining()).toEqual([92]);
    });

    it("a denial grants nothing and charges nothing", async () => {
      const { lease, remaining, reader } = leaseBench(ctx.local, [fixedWindow({ limit: 5, window: "1h" })]);
      await reader.limit("k", { cost: 5 });
      const { result, granted } = await lease({ id: "d1", want: 3 });
      expect(result[0]).toBe(0);
      expect(granted).toBe(0);
      expect(await remaining()).toEqual([0]);
    });

    it("a blocked key: the lease call denies, charges nothing and grants nothing; returns still count", async () => {
      const { lease, remaining, reader } = leaseBench(ctx.local, [fixedWindow({ limit: 100, window: "1h" })]);
      await lease({ id: "b1", want: 10 });
      expect(await remaining()).toEqual([89]);
      await reader.block("k", "1h");
      const { result, granted } = await lease({ id: "b2", want: 10, returns: [{ id: "b1", unspent: 6 }] });
      expect(result[0]).toBe(0);
      expect(result[1]).toBe(0);
      expect(result[4]).toBe(3_600_000); // the wait is the block's
      expect(granted).toBe(0);
      await reader.unblock("k");
      expect(await remaining()).toEqual([95]);
    });

    it("no lease when a policy would be left with too little; the request alone is still decided", async () => {
      const { lease, remaining } = leaseBench(ctx.local, [fixedWindow({ limit: 10, window: "1h" })]);
      const { result, granted } = await lease({ id: "s1", want: 50 });
      expect(result[0]).toBe(1);
      // At most half of what is left goes to one lease.
      expect(granted).toBeLessThanOrEqual(4);
      expect(await remaining()).toEqual([10 - 1 - granted]);
    });

    it("a token bucket is decided against its capacity less the lease reserve", async () => {
      // 1 token a second, leases of 5 s: 5 tokens in reserve.
      const { lease, reader } = leaseBench(ctx.local, [tokenBucket({ capacity: 100, refillRate: 1 })]);
      expect((await reader.limit("k", { cost: 95 })).allowed).toBe(true);
      expect((await lease({ id: "t1" })).result[0]).toBe(0);
      expect((await reader.peek("k")).remaining).toBe(5);
    });

    it("a leased limiter over the store admits from its leases, and never more than the limit", async () => {
      let now = T0;
      const prefix = uniquePrefix();
      const policy = fixedWindow({ limit: 50, window: "1h" });
      const make = () => createRateLimiter({ policy, store: ctx.local, prefix, clock: () => now, mode: "leased", leaseMs: 2000 });
      const instances = [make(), make()];
      expect(instances[0]!.mode).toBe("leased");
      let admitted = 0;
      let fromLease = 0;
      for (let i = 0; i < 200; i++) {
        now += 5;
        const d = await instances[i % 2]!.limit("hot");
        if (d.allowed) admitted++;
        if (d.source === "lease") fromLease++;
        await d.pending;
      }
      for (const limiter of instances) await limiter.flush();
      expect(admitted).toBeLessThanOrEqual(50);
      expect(admitted).toBeGreaterThanOrEqual(40);
      expect(fromLease).toBeGreaterThan(0);
      const exact = createRateLimiter({ policy, store: ctx.local, prefix, clock: () => now });
      // Every unit admitted is charged; every unit leased and not spent came back.
      expect((await exact.peek("hot")).remaining).toBe(50 - admitted);
    });
  });
}
