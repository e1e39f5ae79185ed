// A rule over several keys (`dimensions`), against every integration (Hono, Express 5 and 4,
// Koa, withRateLimit and the Lambda shapes), on the memory store and, for a subset, on a real
// redis-server this file starts: all or nothing, the binding dimension, every dimension's
// figures in the headers, hooks and handler, refunds, settled costs, concurrency and shadow mode.
// Time is injected; nothing sleeps.
import {
  concurrency,
  dimensions,
  fixedWindow,
  type FloodgateError,
  type HttpRateLimitOptions,
  type RateLimitInfo,
  type RateLimitStore,
  redisStore,
  withRateLimit,
} from "@floodgate/core";
import { Redis as IORedis } from "ioredis";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type RedisInstance, startRedis } from "../support/redis-server.ts";
import { createEnv, type Env, flakyStore, ietfHeaders, legacyHeaders } from "./support.ts";
import { type App, TARGETS } from "./targets.ts";

interface Scenario {
  name: string;
  /** Also run on Redis, with the store passed in `options`. */
  redis?: boolean;
  options: (env: Env) => HttpRateLimitOptions<any>;
  run: (app: App, env: Env) => Promise<void>;
}

const perMinute = (limit: number) => fixedWindow({ limit, window: "1m" });
const as = (user: string, org = "acme", status?: number) => ({
  headers: { "x-user": user, "x-org": org },
  ...(status === undefined ? {} : { status }),
});
const userAndOrg = (user: number, org: number) =>
  dimensions({
    user: { key: (req) => req.header("x-user"), policy: perMinute(user) },
    org: { key: (req) => req.header("x-org"), policy: perMinute(org) },
  });

/** The dimensions() value a scenario's options made, for its run. */
const valueOf = new WeakMap<Env, ReturnType<typeof userAndOrg>>();

const base = (env: Env): HttpRateLimitOptions<any> => ({
  clock: env.clock,
  logger: env.logger,
  onDecision: (info) => {
    env.decisions.push(info);
  },
  onLimited: (info) => {
    env.limited.push(info);
  },
});

/** Every dimension's units left, as the decision reports them. */
const left = (info: RateLimitInfo | undefined) =>
  Object.fromEntries(Object.entries(info?.dimensions ?? {}).map(([name, d]) => [name, d.remaining]));
const last = (env: Env) => env.decisions[env.decisions.length - 1];

/** The handler's view, where the target hands it the info (withRateLimit's test handler does not). */
const handlerSaw = (body: string): { dimension?: string; dimensions?: Record<string, { remaining: number; key: string }> } | null =>
  JSON.parse(body).rateLimit;

const SCENARIOS: Scenario[] = [
  {
    name: "admits only what every dimension admits, charges none on a refusal, and names the binding dimension",
    redis: true,
    options: () => ({ rules: { "GET /api/*": { dimensions: userAndOrg(3, 5) } } }),
    async run(app, env) {
      const statuses: number[] = [];
      for (let i = 0; i < 4; i++) statuses.push((await app.send("/api/x", as("u1"))).status);
      expect(statuses).toEqual([200, 200, 200, 429]);
      // The user's limit refused; the organisation was charged for the 3 admitted requests only.
      expect(last(env)!.dimension).toBe("user");
      expect(left(last(env))).toEqual({ user: 0, org: 2 });
      const refused = await app.send("/api/x", as("u1"));
      expect(refused.status).toBe(429);
      expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
      // A second user of the organisation: 2 more, then the organisation refuses.
      const second: number[] = [];
      for (let i = 0; i < 3; i++) second.push((await app.send("/api/x", as("u2"))).status);
      expect(second).toEqual([200, 200, 429]);
      expect(last(env)!.dimension).toBe("org");
      expect(left(last(env))).toEqual({ user: 1, org: 0 });
      expect(last(env)!.dimensions!.user!.key).toBe("u2");
      expect(last(env)!.dimensions!.org!.key).toBe("acme");
      expect(last(env)!.key).toBe("user=u2&org=acme");
      // Another organisation is untouched, and its user's figures bind on an admission.
      const other = await app.send("/api/x", as("u3", "globex"));
      expect(other.status).toBe(200);
      expect(last(env)!.dimension).toBe("user");
      expect(left(last(env))).toEqual({ user: 2, org: 4 });
      // The top-level figures are the binding dimension's.
      expect([last(env)!.limit, last(env)!.remaining, last(env)!.policy]).toEqual([3, 2, "3-per-1m"]);
      // Headers: the binding dimension in the single-figure headers, every dimension as an item.
      expect(legacyHeaders(other.headers)).toMatchObject({ limit: 3, remaining: 2 });
      expect(ietfHeaders(other.headers)).toEqual({
        user: { q: 3, w: 60, r: 2, t: 60 },
        org: { q: 5, w: 60, r: 4, t: 60 },
      });
      const seen = handlerSaw(other.body);
      if (seen !== null) {
        expect(seen.dimension).toBe("user");
        expect(seen.dimensions!.org!.remaining).toBe(4);
      }
      expect(env.limited.map((i) => i.dimension)).toEqual(["user", "user", "org"]);
      expect(env.limited.map((i) => [i.limit, i.remaining, i.retryAfterMs > 0])).toEqual([[3, 0, true], [3, 0, true], [5, 0, true]]);
      // After the window, both are back.
      env.advance(60_000);
      expect((await app.send("/api/x", as("u1"))).status).toBe(200);
      expect(left(last(env))).toEqual({ user: 2, org: 4 });
    },
  },
  {
    name: "a refund by the final status reaches every dimension once",
    redis: true,
    options: () => ({ rules: { "GET /api/*": { dimensions: userAndOrg(3, 10) } }, skipFailedRequests: true }),
    async run(app, env) {
      expect((await app.send("/api/x", as("u1"))).status).toBe(200);
      expect(left(last(env))).toEqual({ user: 2, org: 9 });
      for (let i = 0; i < 3; i++) {
        expect((await app.send("/api/x", as("u1", "acme", 500))).status).toBe(500);
        await app.handle.flush();
        // Charged on the way in, given back in both dimensions once the response failed.
        expect(left(last(env))).toEqual({ user: 1, org: 8 });
      }
      const statuses: number[] = [];
      for (let i = 0; i < 3; i++) statuses.push((await app.send("/api/x", as("u1"))).status);
      expect(statuses).toEqual([200, 200, 429]);
      expect(left(last(env))).toEqual({ user: 0, org: 7 });
    },
  },
  {
    name: "a cost settled after the response is settled in every dimension",
    redis: true,
    options: () => ({
      rules: { "GET /api/*": { dimensions: userAndOrg(10, 100), cost: { estimate: 5, actual: () => 2 } } },
    }),
    async run(app, env) {
      expect((await app.send("/api/x", as("u1"))).status).toBe(200);
      expect(left(last(env))).toEqual({ user: 5, org: 95 });
      await app.handle.flush();
      expect((await app.send("/api/x", as("u1"))).status).toBe(200);
      // The first settled at 2, the second holds its estimate of 5.
      expect(left(last(env))).toEqual({ user: 3, org: 93 });
      await app.handle.flush();
      // 4 used: a third estimate of 5 does not fit the user's 10, and charges no one.
      expect((await app.send("/api/x", as("u1"))).status).toBe(200);
      expect(left(last(env))).toEqual({ user: 1, org: 91 });
      await app.handle.flush();
      const refused = await app.send("/api/x", as("u1"));
      expect(refused.status).toBe(429);
      expect(last(env)!.dimension).toBe("user");
      expect(left(last(env))).toEqual({ user: 4, org: 94 });
    },
  },
  {
    name: "a concurrency dimension is released when each response ends",
    options: () => ({
      rules: {
        "GET /api/*": {
          dimensions: dimensions({
            user: { key: (req) => req.header("x-user"), policy: concurrency({ limit: 1 }) },
            org: { key: (req) => req.header("x-org"), policy: perMinute(100) },
          }),
        },
      },
    }),
    async run(app, env) {
      for (let i = 0; i < 4; i++) {
        expect((await app.send("/api/x", as("u1"))).status).toBe(200);
        await app.handle.flush();
        // One in flight while deciding, none held from the requests before.
        expect(left(last(env))).toEqual({ user: 0, org: 99 - i });
      }
    },
  },
  {
    name: "a rule in shadow decides and charges as an enforced one, and lets every request go on",
    redis: true,
    options: () => ({ rules: { "GET /api/*": { dimensions: userAndOrg(2, 10), shadow: true } } }),
    async run(app, env) {
      const statuses: number[] = [];
      for (let i = 0; i < 4; i++) statuses.push((await app.send("/api/x", as("u1"))).status);
      expect(statuses).toEqual([200, 200, 200, 200]);
      expect(env.decisions.map((d) => d.outcome)).toEqual(["allowed", "allowed", "shadowLimited", "shadowLimited"]);
      expect(env.decisions.map((d) => d.dimension)).toEqual(["user", "user", "user", "user"]);
      // The would-be refusals charged nothing: the organisation was charged twice.
      expect(left(last(env))).toEqual({ user: 0, org: 8 });
      expect(env.limited).toEqual([]);
    },
  },
  {
    name: "a store that fails: the local fallback decides every dimension, or the store-error policy answers",
    options: (env) => ({
      store: env.store = flakyStore("throw"),
      rules: {
        "GET /api/fallback": { dimensions: userAndOrg(2, 5) },
        "GET /api/deny": { dimensions: userAndOrg(2, 5) },
      },
      onStoreError: (error, req) => {
        env.storeErrors.push(error);
        return req?.path === "/api/deny" ? "deny" : "fallback";
      },
    }),
    async run(app, env) {
      const statuses: number[] = [];
      for (let i = 0; i < 3; i++) statuses.push((await app.send("/api/fallback", as("u1"))).status);
      expect(statuses).toEqual([200, 200, 429]);
      expect(env.decisions.map((d) => [d.source, d.dimension])).toEqual([["fallback", "user"], ["fallback", "user"], [
        "fallback",
        "user",
      ]]);
      expect(left(last(env))).toEqual({ user: 0, org: 3 });
      const denied = await app.send("/api/deny", as("u1"));
      expect(denied.status).toBe(429);
      expect([last(env)!.source, last(env)!.dimension, last(env)!.dimensions]).toEqual(["deny", undefined, undefined]);
      expect(env.storeErrors.length).toBe(4);
    },
  },
  {
    name: "the handle refers to the dimensions' limiter, which addresses the rule's counters: a late refund, a dimension's reset",
    redis: true,
    options: (env) => {
      const quotas = userAndOrg(2, 5);
      valueOf.set(env, quotas);
      return { rules: { "GET /api/*": { dimensions: quotas } } };
    },
    async run(app, env) {
      expect(() => app.handle.limiterFor("GET /api/*")).toThrow("counts over dimensions (user, org)");
      await expect(app.handle.reset("u1", { rule: "GET /api/*" })).rejects.toThrow(".limiter()");
      await expect(app.handle.peek("u1", { rule: "GET /api/*" })).rejects.toThrow("counts over dimensions");
      const quotas = valueOf.get(env)!.limiter();
      // Both dimensions on the middleware's store, behind its one resilient wrapper: one store step each.
      expect(quotas.path).toBe("store");
      expect((await app.send("/api/x", as("u1"))).status).toBe(200);
      // Given back later, by the request's charge: in both dimensions.
      await valueOf.get(env)!.refund(last(env)!);
      expect((await app.send("/api/x", as("u1"))).status).toBe(200);
      expect(left(last(env))).toEqual({ user: 1, org: 4 });
      await quotas.dimensions.user.reset("u1");
      expect((await app.send("/api/x", as("u1"))).status).toBe(200);
      expect(left(last(env))).toEqual({ user: 1, org: 3 });
      expect((await quotas.peek({ user: "u1", org: "acme" })).dimensions.org.remaining).toBe(3);
    },
  },
];

const REFUSED: { name: string; options: HttpRateLimitOptions<any>; message: string }[] = [
  {
    name: "dimensions beside a policy",
    options: { rules: { "GET /api/x": { dimensions: userAndOrg(1, 1), policy: perMinute(1) } } },
    message: "`dimensions` without `policy`",
  },
  {
    name: "a rule-level shadowPolicy beside dimensions",
    options: { rules: { "GET /api/x": { dimensions: userAndOrg(1, 1), shadowPolicy: perMinute(1) } } },
    message: "`dimensions` without `shadowPolicy`",
  },
  {
    name: "a value not made by dimensions()",
    options: { rules: { "GET /api/x": { dimensions: { user: { policy: perMinute(1) } } as never } } },
    message: "rules.GET /api/x.dimensions",
  },
];

describe("dimensions()", () => {
  it.each([
    [{}, "expected 1 to 16"],
    [{ "a b": { policy: perMinute(1) } }, 'dimension name "a b"'],
    [{ user: { policy: 5 } }, 'dimension "user": option `policy`'],
    [{ user: { policy: perMinute(1), keys: () => "x" } }, "did you mean `key`?"],
  ])("refuses %j", (spec, message) => {
    expect(() => dimensions(spec as never)).toThrow(message);
  });
});

describe("dimensions().limiter()", () => {
  it("is the one rule's compound limiter; made for none or several rules, it says so", () => {
    const quotas = userAndOrg(1, 1);
    expect(() => quotas.limiter()).toThrow("no middleware was made with it yet");
    withRateLimit(() => new Response(), { rules: { "GET /a": { dimensions: quotas }, "GET /b": { dimensions: quotas } } });
    expect(() => quotas.limiter()).toThrow("the `dimensions` of 2 rules");
  });
});

describe.each(TARGETS)("$name refuses", (target) => {
  it.each(REFUSED)("$name", async ({ options, message }) => {
    const error = await target.start(options).then(() => undefined, (e: unknown) => e);
    expect((error as FloodgateError).code).toBe("INVALID_OPTION");
    expect((error as FloodgateError).message).toContain(message);
  });
});

describe.each(TARGETS)("$name", (target) => {
  let app: App | undefined;
  afterEach(async () => {
    await app?.close();
    app = undefined;
  });
  it.each(SCENARIOS)("$name", async (scenario) => {
    const env = createEnv();
    app = await target.start({ ...base(env), ...scenario.options(env) });
    await scenario.run(app, env);
  });
});

describe("on Redis", () => {
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
  const store = (): RateLimitStore => redisStore({ client, clock: "local" });
  describe.each(TARGETS)("$name", (target) => {
    let app: App | undefined;
    afterEach(async () => {
      await app?.close();
      app = undefined;
    });
    it.each(SCENARIOS.filter((s) => s.redis === true))("$name", async (scenario) => {
      await client.flushall();
      const env = createEnv();
      app = await target.start({ ...base(env), store: store(), ...scenario.options(env) });
      await scenario.run(app, env);
    });
  });
});
