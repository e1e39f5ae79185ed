/**
 * The Redis key layout's side of the store contract: every key a Redis store writes carries a TTL
 * no longer than its state matters, one key per policy, and a reservation's ledger key expires
 * with its ttl. Run beside the contract suite by every Redis harness (contract-*.test.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { concurrency, createRateLimiter, fixedWindow, type RateLimitStore, slidingWindow } from "../../packages/core/src/index.ts";
import { baseKey } from "../../packages/core/src/stores/redis/script-store.ts";
import { ledgerKey } from "../../packages/core/src/stores/redis/reservation-lua.ts";
import { retentionMs } from "../support/kinds.ts";
import { hourly, KINDS, uniquePrefix } from "../stores/store-contract.ts";
import type { RedisHarness } from "./harness.ts";

const maxTtlMs = retentionMs;

export function redisKeyContract(name: string, setup: () => Promise<RedisHarness>): void {
  describe(`Redis keys and their TTLs: ${name}`, () => {
    let h: RedisHarness;
    let serverStore: RateLimitStore;
    let localStore: RateLimitStore;
    const server = () => serverStore;
    const local = () => localStore;
    beforeAll(async () => {
      h = await setup();
      serverStore = h.store("server");
      localStore = h.store("local");
    });
    afterAll(async () => {
      await h?.close();
    });

    it.each(KINDS)("%s: keys carry a TTL no longer than the algorithm needs", async (kind) => {
      const prefix = uniquePrefix();
      const policy = hourly(kind, 5);
      const limiter = createRateLimiter({ policy, store: server(), prefix });
      await limiter.limit("ttl-user", { cost: 2 });
      const [ttl] = await h.pttl!([`${prefix}{ttl-user}`]);
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(maxTtlMs(policy));
      if (kind === "token-bucket") {
        // The bucket is full again after 2 tokens' worth of refill.
        expect(ttl).toBeLessThanOrEqual(2 * policy.intervalMs + 1);
        expect(ttl).toBeGreaterThan(2 * policy.intervalMs - 5_000);
      }
      if (kind === "sliding-log") expect(ttl).toBeGreaterThan(policy.windowMs - 5_000);
      await limiter.reset("ttl-user");
      expect(await h.pttl!([`${prefix}{ttl-user}`])).toEqual([-2]);
    });

    it("several policies: one key per policy, each with its own TTL; reset deletes them all", async () => {
      const prefix = uniquePrefix();
      // Injected time, 2 s into a 10 s window: on the server's clock the 10 s key expires at the
      // next 10 s boundary, and one falling between the charge and the PTTL read made it -2.
      const now = 1_700_000_002_000;
      const limiter = createRateLimiter({
        policy: [fixedWindow({ limit: 5, window: "10s", name: "a" }), slidingWindow({ limit: 5, window: "1h", name: "b" })],
        store: local(),
        prefix,
        clock: () => now,
      });
      await limiter.limit("ttl");
      const [a, b] = await h.pttl!([`${prefix}{ttl}`, `${prefix}{ttl}:1`]);
      expect(a).toBeGreaterThan(0);
      expect(a).toBeLessThanOrEqual(10_000);
      expect(b).toBeGreaterThan(3_600_000);
      expect(b).toBeLessThanOrEqual(7_200_000);
      await limiter.reset("ttl");
      expect(await h.pttl!([`${prefix}{ttl}`, `${prefix}{ttl}:1`])).toEqual([-2, -2]);
    });

    it("every key a reservation writes expires: the ledger key has a TTL of at most its ttl", async () => {
      const prefix = uniquePrefix();
      const limiter = createRateLimiter({
        policy: [concurrency({ limit: 2, timeout: "30s" }), fixedWindow({ limit: 9, window: "1m" })],
        store: server(),
        prefix,
      });
      const r = await limiter.reserve("ttl", { estimate: 3, ttl: "20s" });
      const base = baseKey(prefix, "ttl");
      const [ledger, held, counted] = await h.pttl!([ledgerKey(base, r.id), base, `${base}:1`]);
      expect(ledger).toBeGreaterThan(15_000);
      expect(ledger).toBeLessThanOrEqual(20_000);
      expect(held).toBeGreaterThan(25_000);
      expect(held).toBeLessThanOrEqual(30_000);
      expect(counted).toBeGreaterThan(0);
      expect(await r.settle(5)).toBe(true);
      const [gone, , stillCounted] = await h.pttl!([ledgerKey(base, r.id), base, `${base}:1`]);
      expect(gone).toBe(-2);
      expect(stillCounted).toBeGreaterThan(0);
    });
  });
}
