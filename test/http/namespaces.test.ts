// Identities never share a counter by accident: middlewares with different policies on one store,
// and keys long enough to be shortened, each count on their own, through real Express apps.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { createRateLimiter, fixedWindow, FloodgateError, memoryStore, type RateLimitStore, redisStore, tokenBucket } from "@floodgate/core";
import { rateLimit } from "@floodgate/express";
import express, { type RequestHandler } from "express";
import { Redis as IORedis } from "ioredis";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { fitKey } from "../../packages/core/src/http/rate-limit.ts";
import { policyFingerprint, ruleSlug } from "../../packages/core/src/http/namespace.ts";
import { type RedisInstance, startRedis } from "../support/redis-server.ts";
import { T0 } from "./support.ts";

const clock = (): number => T0;
const perMinute = (limit: number) => fixedWindow({ limit, window: "1m" });

const servers: Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) {
    await new Promise((resolve) => {
      s.closeAllConnections();
      s.close(resolve);
    });
  }
});

/** One Express app with each middleware mounted on its own path, answering 200. */
async function serveApp(
  mounts: Record<string, RequestHandler>,
): Promise<(path: string, headers?: Record<string, string>) => Promise<number>> {
  const app = express();
  for (const [path, middleware] of Object.entries(mounts)) app.use(path, middleware);
  app.use((_req, res) => {
    res.send("ok");
  });
  const server = createServer(app);
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return async (path, headers = {}) => {
    const response = await fetch(base + path, { headers });
    await response.text();
    return response.status;
  };
}

async function statuses(send: (path: string) => Promise<number>, n: number, path: string): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push(await send(path));
  return out;
}

describe.each([
  [
    "memory",
    () =>
      Promise.resolve({ store: memoryStore() as RateLimitStore, second: undefined as RateLimitStore | undefined, close: async () => {} }),
  ],
  ["redis", async () => {
    const redis = await startRedis();
    const clients = [new IORedis(redis.port, redis.host), new IORedis(redis.port, redis.host)];
    return {
      store: redisStore({ client: clients[0]!, clock: "local" }) as RateLimitStore,
      // Another connection and store object: what a second process has.
      second: redisStore({ client: clients[1]!, clock: "local" }) as RateLimitStore | undefined,
      close: async () => {
        for (const c of clients) c.disconnect();
        await redis.stop();
      },
    };
  }],
])("two middlewares on one %s store", (_name, open) => {
  let setup: Awaited<ReturnType<typeof open>>;
  beforeAll(async () => {
    setup = await open();
  });
  afterAll(async () => {
    await setup?.close();
  });

  it("count apart when their policies differ, with no prefix given", async () => {
    const { store } = setup;
    const send = await serveApp({
      "/wide": rateLimit({ policy: perMinute(100), store, clock }),
      "/strict": rateLimit({ policy: perMinute(3), store, clock }),
      "/bucket": rateLimit({ policy: tokenBucket({ capacity: 2, refillRate: 0.001 }), store, clock }),
    });
    expect(await statuses(send, 4, "/wide")).toEqual([200, 200, 200, 200]);
    expect(await statuses(send, 4, "/strict")).toEqual([200, 200, 200, 429]);
    // Another kind on the same key neither resets nor reads the others' state.
    expect(await statuses(send, 3, "/bucket")).toEqual([200, 200, 429]);
    expect(await send("/strict")).toBe(429);
    expect(await statuses(send, 96, "/wide")).toEqual(Array(96).fill(200));
    expect(await send("/wide")).toBe(429);
  });

  it("share counters when configured alike, as the same app in several processes does", async () => {
    const { store, second } = setup;
    const policy = perMinute(5);
    const one = await serveApp({ "/": rateLimit({ policy, store, clock, key: () => "shared-client" }) });
    const two = await serveApp({ "/": rateLimit({ policy: perMinute(5), store: second ?? store, clock, key: () => "shared-client" }) });
    expect([...(await statuses(one, 3, "/x")), ...(await statuses(two, 3, "/x"))]).toEqual([200, 200, 200, 200, 200, 429]);
    expect(await one("/x")).toBe(429);
  });

  it("rules without a prefix count in their own policies' namespace too", async () => {
    const { store } = setup;
    const rules = (limit: number) => ({ "GET /login": perMinute(limit) });
    const both = await serveApp({ "/": rateLimit({ rules: rules(50), store, clock, key: () => "rules-client" }) });
    const strict = await serveApp({ "/": rateLimit({ rules: rules(2), store, clock, key: () => "rules-client" }) });
    expect(await statuses(both, 3, "/login")).toEqual([200, 200, 200]);
    expect(await statuses(strict, 3, "/login")).toEqual([200, 200, 429]);
  });

  it("an explicit prefix is the user's namespace: kept as is, and rejected when other policies already count there", () => {
    const { store } = setup;
    rateLimit({ policy: perMinute(10), store, prefix: "mine:", warnings: false });
    rateLimit({ policy: perMinute(10), store, prefix: "mine:", warnings: false }); // the same policies may share it
    let error: unknown;
    try {
      rateLimit({ policy: perMinute(11), store, prefix: "mine:", warnings: false });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(FloodgateError);
    expect((error as FloodgateError).code).toBe("INVALID_OPTION");
    expect((error as FloodgateError).message).toMatch(/namespace "mine:" of this store already counts other policies/);
    // A limiter shared by two middlewares is one identity.
    const limiter = createRateLimiter({ policy: perMinute(3), store, prefix: "shared:" });
    expect(() => {
      rateLimit({ limiter, warnings: false });
      rateLimit({ limiter, warnings: false });
    }).not.toThrow();
  });
});

describe("namespace keys in Redis", () => {
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

  it("are the policies' fingerprint without a prefix, the prefix as given with one", async () => {
    const store = redisStore({ client });
    const policy = perMinute(7);
    const send = await serveApp({
      "/auto": rateLimit({ policy, store }),
      "/given": rateLimit({ policy, store, prefix: "app1:" }),
      "/ruled": rateLimit({ rules: { "GET /ruled/x": policy }, store }),
    });
    await send("/auto");
    await send("/given");
    await send("/ruled/x");
    const fp = policyFingerprint([policy]);
    expect(fp).toMatch(/^[0-9a-z]{6}$/);
    expect((await client.keys("*")).sort()).toEqual(
      [`app1:{127.0.0.1}`, `fg:${fp}:{127.0.0.1}`, `fg:${ruleSlug("GET /ruled/x")}:${fp}:{127.0.0.1}`].sort(),
    );
    // A rule's namespace is its pattern as a slug: nothing redis-cli would need quoted.
    expect(ruleSlug("GET /ruled/x")).toMatch(/^get-ruled-x-[0-9a-z]{6}$/);
    expect(ruleSlug("GET /ruled/x")).not.toBe(ruleSlug("GET /ruled-x"));
    expect(ruleSlug("GET /ruled/x")).not.toBe(ruleSlug("GET /Ruled/x"));
  });
});

describe("long keys", () => {
  /** 32-bit FNV-1a, as keys over 1,000 characters were once shortened. */
  const fnv = (text: string, from = 0x811c9dc5): number => {
    let h = from;
    for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
    return h >>> 0;
  };
  const oldForm = (key: string): string => `${key.slice(0, 980)}#${fnv(key).toString(36)}`;

  /**
   * Two keys over 1,000 characters with the same first 980 and the same FNV-1a: one counter under
   * the old shortening (found by a birthday search over random tails in a quarter of a second).
   */
  const collision = (): [string, string] => ["k".repeat(995) + "o9inkxu7", "k".repeat(995) + "ot67opqj"];

  it("a pair that collides under FNV-1a counts apart; a short key spelling a shortened one shares nothing", async () => {
    const [a, b] = collision();
    expect(a).not.toBe(b);
    expect(oldForm(a)).toBe(oldForm(b));
    const store = memoryStore();
    const send = await serveApp({
      "/": rateLimit({ policy: perMinute(1), store, clock, key: (req) => req.header("x-key"), warnings: false }),
    });
    expect(await send("/", { "x-key": a })).toBe(200);
    expect(await send("/", { "x-key": a })).toBe(429);
    expect(await send("/", { "x-key": b })).toBe(200);
    // The old shortened form, sent as a key of its own (at most 1,000 characters: counted as it is).
    expect(oldForm(a).length).toBeLessThanOrEqual(1000);
    expect(await send("/", { "x-key": oldForm(a) })).toBe(200);
    // The new shortened form is 1,024 characters: sent as a key, it is shortened in turn.
    expect(fitKey(a)).toHaveLength(1024);
    expect(fitKey(a)).toMatch(/^k{959}#[0-9a-f]{64}$/);
    expect(await send("/", { "x-key": fitKey(a) })).toBe(200);
    expect(fitKey(fitKey(a))).not.toBe(fitKey(a));
  });

  it("keys of at most 1,000 characters are counted as they are", () => {
    const key = "x".repeat(1000);
    expect(fitKey(key)).toBe(key);
    expect(fitKey(`${key}y`)).not.toBe(fitKey(`${key}z`));
  });
});
