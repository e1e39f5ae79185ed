// What a new user met: the headers beside a concurrency policy, "did you mean", an
// express-rate-limit-style rule, and the per-request warning in scripts that build app after app.
import { concurrency, fixedWindow, memoryStore, type RateLimitStore, redisStore, withRateLimit } from "@floodgate/core";
import { rateLimit as expressRateLimit } from "@floodgate/express";
import { rateLimit as honoRateLimit } from "@floodgate/hono";
import { rateLimit as koaRateLimit } from "@floodgate/koa";
import { Hono } from "hono";
import { Redis as IORedis } from "ioredis";
import { afterAll, describe, expect, it } from "vitest";
import { type RedisInstance, startRedis } from "../support/redis-server.ts";
import { ietfHeaders } from "./support.ts";
import { TARGETS } from "./targets.ts";

let redis: RedisInstance | undefined;
let client: IORedis | undefined;
afterAll(async () => {
  client?.disconnect();
  await redis?.stop();
});
const STORES: [string, () => Promise<RateLimitStore>][] = [
  ["memory", async () => memoryStore()],
  ["redis", async () => {
    redis ??= await startRedis();
    client ??= new IORedis(redis.port, redis.host);
    return redisStore({ client });
  }],
];
let prefixes = 0;

describe.each(STORES)("beside a concurrency policy, on %s", (_name, open) => {
  it.each(TARGETS)("$name: legacy headers and remaining describe the rate policy; in flight has its own IETF item", async (target) => {
    const store = await open();
    const app = await target.start({
      store,
      prefix: `edges${++prefixes}:`,
      policy: [concurrency({ limit: 1, timeout: "1m", name: "in-flight" }), fixedWindow({ limit: 10, window: "1m", name: "per-minute" })],
      warnings: false,
    });
    try {
      for (const left of [9, 8]) {
        const reply = await app.send("/api/x");
        expect(reply.status).toBe(200);
        expect(reply.headers.get("x-ratelimit-limit")).toBe("10");
        expect(reply.headers.get("x-ratelimit-remaining")).toBe(String(left));
        const ietf = ietfHeaders(reply.headers);
        expect(ietf["in-flight"]!.r).toBe(0);
        expect(ietf["per-minute"]).toMatchObject({ q: 10, w: 60, r: left });
        if (target.name !== "fetch") {
          expect(JSON.parse(reply.body).rateLimit).toMatchObject({ remaining: left, limit: 10, policy: "per-minute" });
        }
        await app.handle.flush();
      }
    } finally {
      await app.close();
    }
  });
});

describe("options", () => {
  const make = [
    (o: object) => expressRateLimit(o as never),
    (o: object) => koaRateLimit(o as never),
    (o: object) => honoRateLimit(o as never),
    (o: object) => withRateLimit(() => new Response(), o as never),
  ];
  const policy = fixedWindow({ limit: 5, window: "1m" });
  it.each(make.map((m, i) => [i, m] as const))("did you mean: the option meant (%i)", (_i, build) => {
    expect(() => build({ policy, skipSucessfulRequests: true })).toThrow("(did you mean `skipSuccessfulRequests`?)");
    expect(() => build({ policy, onStoreErorr: "allow" })).toThrow("(did you mean `onStoreError`?)");
    expect(() => build({ policy, keyGenrator: () => "k" })).toThrow(
      "did you mean `keyGenerator`? express-rate-limit, hono-rate-limiter: use `key(req)`",
    );
  });
  it.each(make.map((m, i) => [i, m] as const))("a rule written as express-rate-limit writes one says to use a policy (%i)", (_i, build) => {
    expect(() => build({ rules: { "GET /x": { limit: 5 } } })).toThrow(
      'rule "GET /x": unknown option `limit` (express-rate-limit, hono-rate-limiter); use `policy: fixedWindow({ limit, window })`',
    );
    expect(() => build({ rules: { "GET /x": { policy, kye: () => "k" } } })).toThrow("unknown option `kye` (did you mean `key`?)");
  });
});

describe("limiterPerRequest", () => {
  it("is silent for a script that builds 30 apps one after another, each middleware created at its app's start", async () => {
    const logs: string[] = [];
    const logger = { warn: (m: string) => logs.push(m) };
    for (let i = 0; i < 30; i++) {
      const app = new Hono();
      app.use(
        honoRateLimit({
          policy: fixedWindow({ limit: 5, window: "1m" }),
          logger,
          getConnInfo: () => ({ remote: { address: "127.0.0.1" } }),
        }),
      );
      app.get("/", (c) => c.text("ok"));
      const handler = withRateLimit(() => new Response("ok"), {
        policy: fixedWindow({ limit: 5, window: "1m" }),
        logger,
        getClientIp: () => "127.0.0.1",
      });
      await new Promise((resolve) => setTimeout(resolve, 0)); // the app starts; requests come later
      expect((await app.request("/")).status).toBe(200);
      expect((await handler(new Request("http://localhost/"))).status).toBe(200);
    }
    expect(logs.filter((l) => l.includes("limiterPerRequest"))).toEqual([]);
  });

  it("still warns for middleware created inside a handler, once per request", async () => {
    const logs: string[] = [];
    const app = new Hono();
    app.use((c, next) =>
      honoRateLimit({
        policy: fixedWindow({ limit: 5, window: "1m" }),
        logger: { warn: (m) => logs.push(m) },
        getConnInfo: () => ({ remote: { address: "127.0.0.1" } }),
      })(c as never, next)
    );
    app.get("/", (c) => c.text("ok"));
    for (let i = 0; i < 25; i++) await app.request("/");
    expect(logs.filter((l) => l.includes("limiterPerRequest"))).toHaveLength(1);
  });
});
