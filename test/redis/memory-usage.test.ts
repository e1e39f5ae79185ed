/**
 * Redis memory per identifier (MEMORY USAGE, all keys of the identifier), per algorithm, beside
 * rate-limiter-flexible's RateLimiterRedis (fixed window) with the same identifier.
 * Targets: token bucket and fixed window <= RLF's fixed window; sliding-window counter <= 2x it.
 * The figures are printed (and recorded in bench/README.md, "Redis memory per identifier").
 */
import { Redis as IORedis } from "ioredis";
import { RateLimiterRedis } from "rate-limiter-flexible";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRateLimiter, type PolicyKind, redisStore, slidingWindow } from "../../packages/core/src/index.ts";
import { policyFingerprint } from "../../packages/core/src/http/namespace.ts";
import { type RedisInstance, startRedis } from "../support/redis-server.ts";
import { hourly } from "../stores/store-contract.ts";

const IDENTIFIERS = ["u1", "10.0.0.1", "203.0.113.42", "user:1234567", "2001:db8:85a3::8a2e:370:7334"];

describe("Redis memory per identifier", () => {
  let redis: RedisInstance;
  let client: IORedis;
  beforeAll(async () => {
    redis = await startRedis();
    client = new IORedis(redis.port, redis.host);
  });
  afterAll(async () => {
    client?.disconnect();
    await redis?.stop();
  });

  const usage = async (keys: string[]): Promise<number> => {
    let total = 0;
    for (const key of keys) total += (await client.memory("USAGE", key, "SAMPLES", 0)) ?? 0;
    return total;
  };

  async function rlf(id: string): Promise<number> {
    const limiter = new RateLimiterRedis({ storeClient: client, points: 100, duration: 3600 });
    await limiter.consume(id);
    return usage([`rlflx:${id}`]);
  }

  async function ours(kind: PolicyKind, id: string, requests: number): Promise<number> {
    const limiter = createRateLimiter({ policy: hourly(kind, 100), store: redisStore({ client }) });
    for (let i = 0; i < requests; i++) await limiter.limit(id);
    const keys = await client.keys(`fg:{${id}}*`);
    expect(keys).toEqual([`fg:{${id}}`]);
    const bytes = await usage(keys);
    await limiter.reset(id);
    return bytes;
  }

  it("meets the targets and prints the figures", async () => {
    const rows: string[] = [];
    for (const id of IDENTIFIERS) {
      const baseline = await rlf(id);
      // Sliding counter with both windows populated and a 1 s window (a 10-digit window index).
      let now = 1_700_000_000_000;
      const sliding = createRateLimiter({
        policy: slidingWindow({ limit: 100, window: "1s" }),
        store: redisStore({ client, clock: "local" }),
        prefix: "fg:",
        clock: () => now,
      });
      for (let i = 0; i < 100; i++) await sliding.limit(id);
      now += 1900;
      for (let i = 0; i < 90; i++) expect((await sliding.limit(id)).allowed).toBe(true);
      const swFull = await usage([`fg:{${id}}`]);
      await sliding.reset(id);
      expect(swFull, `sliding window (both windows) for ${id}`).toBeLessThanOrEqual(2 * baseline);
      // Filled to the limit: the largest values each state holds.
      const tb = await ours("token-bucket", id, 100);
      const fw = await ours("fixed-window", id, 100);
      const sw = await ours("sliding-window", id, 100);
      const sl1 = await ours("sliding-log", id, 1);
      const sl100 = await ours("sliding-log", id, 100);
      rows.push(`| \`${id}\` | ${baseline} | ${tb} | ${fw} | ${sw} / ${swFull} | ${sl1} | ${sl100} |`);
      expect(tb, `token bucket for ${id}`).toBeLessThanOrEqual(baseline);
      expect(fw, `fixed window for ${id}`).toBeLessThanOrEqual(baseline);
      expect(sw, `sliding window for ${id}`).toBeLessThanOrEqual(2 * baseline);
    }
    console.log(
      [
        "| identifier | RLF fixed window | token bucket | fixed window | sliding window (1 h / 1 s, both windows) | sliding log (1 entry) | sliding log (100 entries) |",
        "|---|---|---|---|---|---|---|",
        ...rows,
      ].join("\n"),
    );
  });

  // A middleware without `prefix` counts under `fg:<6-character fingerprint of its policies>:`.
  // Those 7 bytes cross one allocator size class (16 bytes) for some identifier lengths (e.g.
  // "10.0.0.1": 72 bytes against 56), never more.
  it("a middleware's default namespace costs at most one allocator size class more", async () => {
    const rows: string[] = [];
    for (const id of IDENTIFIERS) {
      const baseline = await rlf(id);
      const figures: number[] = [];
      for (const kind of ["token-bucket", "fixed-window"] as const) {
        const policy = hourly(kind, 100);
        const prefix = `fg:${policyFingerprint([policy])}:`;
        const limiter = createRateLimiter({ policy, store: redisStore({ client }), prefix });
        for (let i = 0; i < 100; i++) await limiter.limit(id);
        const bytes = await usage([`${prefix}{${id}}`]);
        await limiter.reset(id);
        expect(bytes, `${kind} for ${id}`).toBeLessThanOrEqual(baseline + 16);
        figures.push(bytes);
      }
      rows.push(`| \`${id}\` | ${baseline} | ${figures.join(" | ")} |`);
    }
    console.log(
      ["| identifier | RLF fixed window | token bucket (middleware) | fixed window (middleware) |", "|---|---|---|---|", ...rows].join(
        "\n",
      ),
    );
  });
});
