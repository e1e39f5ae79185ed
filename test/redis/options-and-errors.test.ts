import { Redis as UpstashRedis } from "@upstash/redis";
import { Redis as IORedis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRateLimiter, FloodgateError, redisStore, upstashStore } from "../../packages/core/src/index.ts";
import { freePort } from "../support/redis-server.ts";
import { hourly, uniquePrefix } from "../stores/store-contract.ts";
import { type UpstashHarness, upstashHarness } from "./harness.ts";

function invalid(fn: () => unknown): FloodgateError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(FloodgateError);
    expect((error as FloodgateError).code).toBe("INVALID_OPTION");
    return error as FloodgateError;
  }
  throw new Error("expected an INVALID_OPTION error");
}

const fakeUpstash = { evalsha: async () => [1], eval: async () => [1], del: async () => 0 };
const fakeIORedis = { evalsha: async () => [1], eval: async () => [1], del: async () => 0 };

describe("options", () => {
  it("upstashStore names the option, the value received and what is accepted", () => {
    expect(invalid(() => upstashStore({} as never)).message).toMatch(/`redis`.*undefined.*@upstash\/redis Redis instance/);
    expect(invalid(() => upstashStore({ redis: 42 } as never)).message).toMatch(/`redis`: received 42/);
    const clock = invalid(() => upstashStore({ redis: fakeUpstash, clock: "utc" as never }));
    expect(clock.message).toMatch(/`clock`.*"utc".*"server" \(default\) or "local"/);
    expect(invalid(() => upstashStore({ redis: fakeUpstash, denyCache: "yes" as never })).message).toMatch(
      /`denyCache`.*"yes".*true \(default\) or false/,
    );
    expect(invalid(() => upstashStore({ redis: fakeUpstash, denyCacheMaxKeys: 0 })).message).toMatch(
      /`denyCacheMaxKeys`.*received 0.*whole number/,
    );
    expect(invalid(() => upstashStore({ redis: fakeUpstash, clok: "local" } as never)).message).toMatch(
      /unknown option `clok`.*accepted options: redis, clock, denyCache, denyCacheMaxKeys/,
    );
    expect(invalid(() => upstashStore(undefined as never)).message).toMatch(/expected an options object/);
  });

  it("redisStore names the option, the value received and what is accepted", () => {
    expect(invalid(() => redisStore({ client: "redis://x" } as never)).message).toMatch(
      /`client`: received "redis:\/\/x"; expected an ioredis/,
    );
    expect(invalid(() => redisStore({ client: {} } as never)).message).toMatch(/`client`: received an object/);
    expect(invalid(() => redisStore({ client: fakeIORedis, clock: 5 as never })).message).toMatch(/`clock`: received 5/);
    expect(redisStore({ client: fakeIORedis }).ownsClock).toBe(true);
    expect(redisStore({ client: fakeIORedis, clock: "local" }).ownsClock).toBe(false);
    expect(upstashStore({ redis: fakeUpstash }).name).toBe("upstash");
  });

  it("rejects a fixed window whose count cannot be packed exactly", async () => {
    const store = redisStore({ client: fakeIORedis });
    const limiter = createRateLimiter({ policy: { ...hourly("fixed-window", 1), limit: 2 ** 31 }, store });
    await expect(limiter.limit("x")).rejects.toMatchObject({
      code: "INVALID_ARGUMENT",
      message: expect.stringMatching(/fixed-window limits up to 2147483647/),
    });
  });
});

describe("store failures surface as STORE_ERROR with the cause attached", () => {
  let h: UpstashHarness;
  beforeAll(async () => {
    h = await upstashHarness();
  });
  afterAll(async () => {
    await h?.close();
  });

  it("upstash: wrong token (HTTP 401)", async () => {
    const redis = new UpstashRedis({ url: h.bridge.url, token: "wrong", enableTelemetry: false });
    const limiter = createRateLimiter({ policy: hourly("token-bucket", 5), store: upstashStore({ redis }) });
    const error = await limiter.limit("x").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(FloodgateError);
    expect(error).toMatchObject({ code: "STORE_ERROR", message: expect.stringMatching(/^upstash store: consume failed: .*Unauthorized/) });
    expect((error as FloodgateError).cause).toBeInstanceOf(Error);
    await expect(limiter.reset("x")).rejects.toMatchObject({ code: "STORE_ERROR" });
    await expect(limiter.peek("x")).rejects.toMatchObject({ code: "STORE_ERROR" });
    await expect(limiter.refund("x")).rejects.toMatchObject({ code: "STORE_ERROR" });
  });

  it("upstash: nothing listening", async () => {
    const port = await freePort();
    const redis = new UpstashRedis({ url: `http://127.0.0.1:${port}`, token: "t", enableTelemetry: false, retry: { retries: 0 } });
    const limiter = createRateLimiter({ policy: hourly("fixed-window", 5), store: upstashStore({ redis }) });
    await expect(limiter.limit("x")).rejects.toMatchObject({ code: "STORE_ERROR", cause: expect.anything() });
  });

  it("ioredis: an error reply from the server (OOM)", async () => {
    const client = new IORedis(h.redis.port, h.redis.host);
    try {
      await client.config("SET", "maxmemory-policy", "noeviction");
      await client.config("SET", "maxmemory", "1");
      const limiter = createRateLimiter({ policy: hourly("token-bucket", 5), store: redisStore({ client }), prefix: uniquePrefix() });
      const error = await limiter.limit("x").catch((e: unknown) => e);
      expect(error).toMatchObject({ code: "STORE_ERROR", message: expect.stringMatching(/^redis store: consume failed: .*OOM/) });
      expect((error as FloodgateError).cause).toBeInstanceOf(Error);
    } finally {
      await client.config("SET", "maxmemory", "0");
      client.disconnect();
    }
  });

  it("a limiter reconfigured under the same prefix starts afresh instead of failing", async () => {
    const client = new IORedis(h.redis.port, h.redis.host);
    try {
      const prefix = uniquePrefix();
      const kinds = [
        "fixed-window",
        "sliding-log",
        "sliding-window",
        "sliding-log",
        "token-bucket",
        "sliding-window",
        "fixed-window",
      ] as const;
      for (const kind of kinds) {
        const limiter = createRateLimiter({ policy: hourly(kind, 5), store: redisStore({ client }), prefix });
        const d = await limiter.limit("same", { cost: 2 });
        expect(d.allowed, kind).toBe(true);
        await limiter.refund("same");
      }
    } finally {
      client.disconnect();
    }
  });

  it("ioredis: connection closed", async () => {
    const client = new IORedis(h.redis.port, h.redis.host, { maxRetriesPerRequest: 0, enableOfflineQueue: false, lazyConnect: true });
    await client.connect();
    await client.ping();
    client.disconnect();
    const limiter = createRateLimiter({ policy: hourly("token-bucket", 5), store: redisStore({ client }) });
    await expect(limiter.limit("x")).rejects.toMatchObject({ code: "STORE_ERROR" });
  });
});

describe("a client that rejects with something other than an Error", () => {
  it.each([["a string", "down"], ["an object without a prototype", Object.create(null) as unknown]])(
    "%s: the limiter rejects with a STORE_ERROR FloodgateError, not a TypeError",
    async (_what, reason) => {
      // The client is the caller's; this one stands for any client whose promise rejects oddly.
      const reject = (): Promise<never> => Promise.reject(reason);
      const limiter = createRateLimiter({
        policy: hourly("fixed-window", 5),
        store: redisStore({ client: { evalsha: reject, eval: reject, del: reject } }),
      });
      const error = await limiter.limit("x").catch((e: unknown) => e);
      expect(error).toBeInstanceOf(FloodgateError);
      expect(error).toMatchObject({ code: "STORE_ERROR", message: expect.stringMatching(/^redis store: consume failed: /) });
      expect((error as FloodgateError).cause).toBe(reason);
    },
  );
});
