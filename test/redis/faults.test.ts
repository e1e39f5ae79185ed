/** Faults against real redis-server processes: odd reply shapes, lost replies, restarts. */
import { Redis as IORedis } from "ioredis";
import { createClient } from "redis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRateLimiter, redisStore } from "../../packages/core/src/index.ts";
import { startRedis, type RedisInstance } from "../support/redis-server.ts";
import { hourly, uniquePrefix } from "../stores/store-contract.ts";

let redis: RedisInstance;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis?.stop();
});

describe("replies of an unexpected shape are a STORE_ERROR, never a decision", () => {
  it("ioredis with stringNumbers: true (integers arrive as strings)", async () => {
    const client = new IORedis(redis.port, redis.host, { stringNumbers: true });
    try {
      for (const policy of [hourly("fixed-window", 2), [hourly("token-bucket", 2), hourly("sliding-window", 5, "b")]]) {
        const limiter = createRateLimiter({ policy, store: redisStore({ client }), prefix: uniquePrefix() });
        // Read as numbers, ["1", "1", ...] would be a denial of a request the store admitted and charged.
        await expect(limiter.limit("a")).rejects.toMatchObject({
          code: "STORE_ERROR",
          message: expect.stringMatching(/^redis store: consume got an unexpected reply from Redis .*expected an array of \d+ integers/),
        });
        await expect(limiter.peek("a")).rejects.toMatchObject({ code: "STORE_ERROR" });
      }
    } finally {
      client.disconnect();
    }
  });

  it("node-redis speaking RESP3 still gets integers: decisions as usual", async () => {
    const client = createClient({ socket: { host: redis.host, port: redis.port }, RESP: 3 });
    await client.connect();
    try {
      const limiter = createRateLimiter({ policy: [hourly("fixed-window", 2), hourly("sliding-log", 5, "b")], store: redisStore({ client }), prefix: uniquePrefix() });
      expect((await limiter.limit("a")).allowed).toBe(true);
      expect((await limiter.limit("a")).remaining).toBe(0);
      const denied = await limiter.limit("a");
      expect(denied.allowed).toBe(false);
      expect(denied.retryAfterMs).toBeGreaterThan(0);
    } finally {
      client.destroy();
    }
  });
});
