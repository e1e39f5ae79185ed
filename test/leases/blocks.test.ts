/**
 * Blocks in leased mode, on Redis: a lease call on a blocked key is denied as a consume is
 * (nothing charged, no lease, the returns still counted), and the instance that blocks or resets a
 * key stops spending its own leases of it.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRateLimiter, fixedWindow, type RateLimiter } from "../../packages/core/src/index.ts";
import type { PolicySet } from "../../packages/core/src/stores/store.ts";
import { uniquePrefix } from "../stores/store-contract.ts";
import { ioredisHarness, type RedisHarness } from "../redis/harness.ts";

let h: RedisHarness;
beforeAll(async () => {
  h = await ioredisHarness();
});
afterAll(async () => {
  await h?.close();
});

const policy = () => fixedWindow({ limit: 1000, window: "1h" });

/** A leased limiter holding a lease of "k": it has served enough calls to measure a rate and lease. */
async function holding(prefix: string): Promise<RateLimiter> {
  const limiter = createRateLimiter({ policy: policy(), store: h.store("server", { denyCache: false }), prefix, mode: "leased" });
  expect(limiter.mode).toBe("leased");
  for (let i = 0; i < 50; i++) expect((await limiter.limit("k")).allowed).toBe(true);
  return limiter;
}

describe("blocks in leased mode", () => {
  it("a lease call on a blocked key denies, charges nothing and grants nothing; returns still count", async () => {
    const store = h.store("server", { denyCache: false });
    const set: PolicySet = { prefix: uniquePrefix(), policies: [policy()] };
    const reader = createRateLimiter({ policy: set.policies, store, prefix: set.prefix });
    const granted = await store.lease!(set, "k", { id: "l1", cost: 1, want: 20, lifeMs: 5000, minLifeMs: 100 }, Date.now());
    expect(granted[0]).toBe(1);
    expect(granted[6]).toBe(20);
    expect((await reader.peek("k")).remaining).toBe(979);
    await reader.block("k", "1h");
    const denied = await store.lease!(set, "k", {
      id: "l2",
      cost: 1,
      want: 20,
      lifeMs: 5000,
      minLifeMs: 100,
      returns: [{ id: "l1", unspent: 15 }],
    }, Date.now());
    expect(denied[0]).toBe(0);
    expect(denied[1]).toBe(0);
    expect(denied[4]).toBeGreaterThan(3_500_000); // the wait is the block's
    expect(denied[6]).toBe(0); // no lease
    await reader.unblock("k");
    expect((await reader.peek("k")).remaining).toBe(994); // the 15 returned, nothing charged
  });

  it("a block reaches the instance that made it, and every instance's next store call", async () => {
    const prefix = uniquePrefix();
    const a = await holding(prefix);
    const b = createRateLimiter({ policy: policy(), store: h.store("server", { denyCache: false }), prefix, mode: "leased" });
    await a.block("k", "1h");
    for (const limiter of [a, b]) {
      const d = await limiter.limit("k");
      expect(d.allowed).toBe(false);
      expect(d.retryAfterMs).toBeGreaterThan(3_500_000);
    }
    await a.unblock("k");
    expect((await a.limit("k")).allowed).toBe(true);
  });

  it("reset() gives back the instance's leases of the key: the next decision is the store's", async () => {
    const prefix = uniquePrefix();
    const a = await holding(prefix);
    const reader = createRateLimiter({ policy: policy(), store: h.store("server", { denyCache: false }), prefix });
    await a.reset("k");
    await h.admin.config("RESETSTAT");
    await a.limit("k");
    const info = (await h.admin.info("commandstats")) as string;
    expect(info).toMatch(/cmdstat_evalsha:calls=1\b/);
    expect((await reader.peek("k")).remaining).toBeLessThan(1000);
  });
});
