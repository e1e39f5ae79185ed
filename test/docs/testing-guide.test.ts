/**
 * The snippets of docs/testing.md, as written there, so the guide's code keeps working. (The
 * Redis and Upstash cases start their own redis-server and local Upstash bridge, where the guide
 * reads REDIS_URL and the variables `npm run upstash-local` prints.)
 */
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createRateLimiter, redisStore, slidingWindow, tokenBucket, upstashStore, withRateLimit } from "@floodgate/core";
import { rateLimit, type RateLimitEnv } from "@floodgate/hono";
import { type Context, Hono } from "hono";
import { Redis } from "ioredis";
import { Redis as Upstash } from "@upstash/redis";
import { type RedisInstance, startRedis } from "../support/redis-server.ts";
import { startUpstashBridge, type UpstashBridge } from "@floodgate/upstash-local";

it("a token bucket refills one token per second", async () => {
  let now = Date.UTC(2030, 0, 1);
  const limiter = createRateLimiter({ policy: tokenBucket({ capacity: 2, refillRate: 1 }), clock: () => now });

  expect((await limiter.limit("user:1")).allowed).toBe(true);
  expect((await limiter.limit("user:1")).allowed).toBe(true);
  const denied = await limiter.limit("user:1");
  expect(denied.allowed).toBe(false);
  expect(denied.retryAfterMs).toBe(1000);

  now += 999;
  expect((await limiter.limit("user:1")).allowed).toBe(false);
  now += 1;
  expect((await limiter.limit("user:1")).allowed).toBe(true);
});

function makeApp(clock: () => number) {
  const app = new Hono<RateLimitEnv>();
  app.use(
    "/api/*",
    rateLimit({
      policy: slidingWindow({ limit: 2, window: "1m" }),
      clock,
      // app.request() has no socket: say who the client is.
      getConnInfo: (c: Context) => ({ remote: { address: c.req.header("x-test-ip") ?? "203.0.113.7" } }),
    }),
  );
  app.get("/api/hello", (c) => c.json({ remaining: c.get("rateLimit")?.remaining }));
  return app;
}

describe("GET /api/hello", () => {
  it("allows 2 a minute, then answers 429 with Retry-After", async () => {
    let now = Date.UTC(2030, 0, 1);
    const app = makeApp(() => now);

    expect((await app.request("/api/hello")).status).toBe(200);
    const second = await app.request("/api/hello");
    expect(await second.json()).toEqual({ remaining: 0 });
    expect(second.headers.get("RateLimit")).toBe('"2-per-1m";r=0;t=120');

    const limited = await app.request("/api/hello");
    expect(limited.status).toBe(429);
    expect(limited.headers.get("Retry-After")).toBe("90");

    now += 90_000;
    expect((await app.request("/api/hello")).status).toBe(200);
  });

  it("counts each client on its own", async () => {
    const app = makeApp(() => Date.UTC(2030, 0, 1));
    for (let i = 0; i < 2; i++) await app.request("/api/hello");
    expect((await app.request("/api/hello")).status).toBe(429);
    expect((await app.request("/api/hello", { headers: { "x-test-ip": "198.51.100.4" } })).status).toBe(200);
  });
});

it("a fetch handler, called directly", async () => {
  const handler = withRateLimit(() => new Response("ok"), {
    policy: slidingWindow({ limit: 1, window: "1m" }),
    getClientIp: () => "203.0.113.7",
  });
  expect((await handler(new Request("http://localhost/"))).status).toBe(200);
  expect((await handler(new Request("http://localhost/"))).status).toBe(429);
});

describe("resetting between tests", () => {
  const limiter = createRateLimiter({ policy: slidingWindow({ limit: 1, window: "1h" }) });
  const handler = withRateLimit(() => new Response("ok"), { limiter, getClientIp: () => "203.0.113.7" });

  it("the first request passes", async () => {
    expect((await handler(new Request("http://localhost/"))).status).toBe(200);
    await limiter.reset("203.0.113.7");
  });
  it("and passes again after reset", async () => {
    expect((await handler(new Request("http://localhost/"))).status).toBe(200);
    await limiter.reset("203.0.113.7");
  });
});

it("warnings can be asserted", () => {
  const logger = { warn: vi.fn() };
  rateLimit({ policy: slidingWindow({ limit: 1, window: "1m" }), trustProxy: true, logger });
  expect(logger.warn).toHaveBeenCalledWith(expect.stringContaining("trustProxyTrue"));
});

it("fake timers: create the limiter after installing them", async () => {
  vi.useFakeTimers({ now: Date.UTC(2030, 0, 1) });
  try {
    const limiter = createRateLimiter({ policy: slidingWindow({ limit: 1, window: "1m" }) });
    expect((await limiter.limit("a")).allowed).toBe(true);
    expect((await limiter.limit("a")).allowed).toBe(false);
    vi.advanceTimersByTime(120_000);
    expect((await limiter.limit("a")).allowed).toBe(true);
  } finally {
    vi.useRealTimers();
  }
});

describe("Redis with an injected clock", () => {
  let server: RedisInstance;
  let client: Redis;
  beforeAll(async () => {
    server = await startRedis();
    vi.stubEnv("REDIS_URL", server.url);
    client = new Redis(process.env.REDIS_URL!);
  });
  afterAll(async () => {
    vi.unstubAllEnvs();
    client.disconnect();
    await server.stop();
  });
  it("replays time exactly", async () => {
    let now = Date.UTC(2030, 0, 1);
    const limiter = createRateLimiter({
      policy: slidingWindow({ limit: 2, window: "1m" }),
      store: redisStore({ client, clock: "local" }),
      prefix: `test:${Math.random().toString(36).slice(2)}:`,
      clock: () => now,
    });
    await limiter.limit("a");
    await limiter.limit("a");
    expect((await limiter.limit("a")).retryAfterMs).toBe(90_000);
    now += 90_000;
    expect((await limiter.limit("a")).allowed).toBe(true);
  });
});

describe("the Upstash store against the local bridge", () => {
  let server: RedisInstance;
  let bridge: UpstashBridge;
  beforeAll(async () => {
    server = await startRedis();
    bridge = await startUpstashBridge({ redis: { host: server.host, port: server.port } });
    vi.stubEnv("UPSTASH_REDIS_REST_URL", bridge.url);
    vi.stubEnv("UPSTASH_REDIS_REST_TOKEN", bridge.token);
  });
  afterAll(async () => {
    vi.unstubAllEnvs();
    await bridge.stop();
    await server.stop();
  });
  it("shares one limit between two limiters", async () => {
    const redis = Upstash.fromEnv();
    const prefix = `test:${crypto.randomUUID()}:`;
    const policy = slidingWindow({ limit: 3, window: "1m" });
    const a = createRateLimiter({ policy, prefix, store: upstashStore({ redis }) });
    const b = createRateLimiter({ policy, prefix, store: upstashStore({ redis }) });
    expect((await a.limit("user:1")).remaining).toBe(2);
    expect((await b.limit("user:1")).remaining).toBe(1);
    await a.reset("user:1");
  });
});
