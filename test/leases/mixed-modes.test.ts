/**
 * Leased and exact limiters on one token-bucket key (a rolling deploy turning leased mode on), and
 * leased limiters with different `leaseMs`: every admission, whoever made it, is one exact mode
 * would make. Replayed through the independent checker (test/support/exact-checker.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRateLimiter, type RateLimiter, tokenBucket } from "../../packages/core/src/index.ts";
import { uniquePrefix } from "../stores/store-contract.ts";
import { ioredisHarness, type RedisHarness, upstashHarness } from "../redis/harness.ts";
import { type Admission, check, describePolicy } from "../support/exact-checker.ts";

const T0 = 1_700_002_800_000;
// 200 tokens, one every 50 ms: a 2 s lease life refills 40 of them.
const policy = tokenBucket({ capacity: 200, refillRate: 20 });

describe.each([["ioredis", ioredisHarness], ["upstash", upstashHarness]] as const)(
  "one token-bucket key decided by exact and leased limiters (%s)",
  (_name, make) => {
    let h: RedisHarness;
    beforeAll(async () => {
      h = await make();
    });
    afterAll(async () => {
      await h?.close();
    });

    /**
     * The trace where a lease's early charge lags most: instance 0 (leased, 2 s) measures a rate
     * on a full bucket and takes a lease, stays idle, spends 30 of its units just before the lease
     * ends and gives the rest back; then `other` empties the bucket at that instant. Exact mode
     * charges those 30 units when they are spent, so the bucket has 30 fewer tokens for `other`.
     */
    async function trace(other: { mode: "exact" } | { mode: "leased"; leaseMs: number }) {
      let now = T0 + 1000;
      const prefix = uniquePrefix();
      const make = (m: { mode: "exact" } | { mode: "leased"; leaseMs: number }): RateLimiter =>
        createRateLimiter({ policy, store: h.store("local", { denyCache: false }), prefix, clock: () => now, ...m });
      const leased = make({ mode: "leased", leaseMs: 2000 });
      const second = make(other);
      const admitted: Admission[] = [];
      let fromLease = 0;
      const ask = async (limiter: RateLimiter, by: number) => {
        const d = await limiter.limit("hot");
        if (d.allowed) admitted.push({ atUs: Math.floor(now * 1000), cost: 1, by });
        if (by === 0 && d.source === "lease") fromLease++;
        await d.pending;
        return d.allowed;
      };
      for (let i = 0; i < 5; i++, now += 10) await ask(leased, 0);
      now += 1850;
      for (let i = 0; i < 30; i++) await ask(leased, 0);
      await leased.flush();
      for (let i = 0; i < 250; i++) if (!(await ask(second, 1))) break;
      await second.flush();
      return { violations: check([describePolicy(policy)], admitted), fromLease };
    }

    it("an exact limiter beside a leased one (a rolling deploy turning leased mode on) admits nothing an exact bucket refuses", async () => {
      const r = await trace({ mode: "exact" });
      expect(r.fromLease).toBeGreaterThanOrEqual(25); // the trace did spend from a lease
      expect(r.violations).toEqual([]);
    });

    it("leased limiters with different leaseMs admit nothing an exact bucket refuses", async () => {
      const r = await trace({ mode: "leased", leaseMs: 300 });
      expect(r.fromLease).toBeGreaterThanOrEqual(25);
      expect(r.violations).toEqual([]);
    });
  },
);
