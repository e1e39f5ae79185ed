/**
 * Clock skew: two limiters (two stores, two clients: two "instances") whose local clocks differ
 * by 30 s share one identifier. On server time they admit exactly the limit; on local time the
 * skew hands the fast instance fresh quota (shown for contrast, so this test measures something).
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { Redis as IORedis } from "ioredis";
import { createRateLimiter, type Policy, type RateLimitStore, redisStore, upstashStore } from "../../packages/core/src/index.ts";
import { clearOfHourBoundary, KINDS, uniquePrefix, windowed } from "../stores/store-contract.ts";
import { type UpstashHarness, upstashHarness } from "./harness.ts";

const SKEW_MS = 30_000;
const LIMIT = 10;

async function admitted(stores: [RateLimitStore, RateLimitStore], policy: Policy, prefix: string): Promise<number> {
  // Real time, one instance 30 s ahead: a calendar window's client sends the periods around its
  // clock, and the server refuses a clock off by more than half a period.
  const clocks = [() => Date.now(), () => Date.now() + SKEW_MS];
  const limiters = stores.map((store, i) => createRateLimiter({ policy, store, prefix, clock: clocks[i]! }));
  let allowed = 0;
  for (let round = 0; round < 3 * LIMIT; round++) {
    for (const limiter of limiters) if ((await limiter.limit("shared")).allowed) allowed++;
  }
  return allowed;
}

describe("clock skew of 30 s between two instances", () => {
  let h: UpstashHarness;
  let tcp: IORedis[];
  beforeAll(async () => {
    h = await upstashHarness();
    tcp = [new IORedis(h.redis.port, h.redis.host), new IORedis(h.redis.port, h.redis.host)];
  });
  beforeEach(() => clearOfHourBoundary(10_000));
  afterAll(async () => {
    for (const c of tcp ?? []) c.disconnect();
    await h?.close();
  });

  // A token bucket or log of 40 s: the instance 30 s ahead would refill on its own clock. Aligned
  // windows last an hour, and beforeEach keeps the test clear of a boundary on the server's clock.
  it.each(KINDS)("server time admits exactly the limit: %s (TCP and Upstash instances mixed)", async (kind) => {
    const policy = windowed(kind, LIMIT, kind === "fixed-window" || kind === "sliding-window" ? 3_600_000 : 40_000);
    const stores: [RateLimitStore, RateLimitStore] = [redisStore({ client: tcp[0]! }), upstashStore({ redis: h.client })];
    expect(await admitted(stores, policy, uniquePrefix())).toBe(LIMIT);
    const both: [RateLimitStore, RateLimitStore] = [redisStore({ client: tcp[0]! }), redisStore({ client: tcp[1]! })];
    expect(await admitted(both, policy, uniquePrefix())).toBe(LIMIT);
  });

  it("for contrast, local clocks over-admit (token bucket)", async () => {
    const policy = windowed("token-bucket", LIMIT, 40_000);
    const stores: [RateLimitStore, RateLimitStore] = [
      redisStore({ client: tcp[0]!, clock: "local" }),
      redisStore({ client: tcp[1]!, clock: "local" }),
    ];
    expect(await admitted(stores, policy, uniquePrefix())).toBeGreaterThan(LIMIT);
  });
});
