// Rolling out a limit, against every integration (Hono, Express 5 and 4, Koa, withRateLimit and
// the Lambda shapes): shadow mode, gradual enforcement, shadow policies and warning thresholds.
// A shadow request is decided and charged exactly as an enforced one, and goes on; time is
// injected, nothing sleeps.
import { fixedWindow, type FloodgateError, type HttpRateLimitOptions, type RateLimitInfo } from "@floodgate/core";
import { type RateLimitStore, redisStore } from "@floodgate/core";
import { Redis as IORedis } from "ioredis";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type RedisInstance, startRedis } from "../support/redis-server.ts";
import { createEnv, type Env, hasRateLimitHeaders, ietfHeaders } from "./support.ts";
import { type App, TARGETS } from "./targets.ts";

interface Scenario {
  name: string;
  /** Also run on Redis, with the store passed in `options`. */
  redis?: boolean;
  options: (env: Env) => HttpRateLimitOptions<any>;
  run: (app: App, env: Env) => Promise<void>;
}

const perMinute = (limit: number, name?: string) => fixedWindow({ limit, window: "1m", ...(name === undefined ? {} : { name }) });
const user = (id: string) => ({ headers: { "x-user": id } });
const byUser: HttpRateLimitOptions<any>["key"] = (req) => req.header("x-user");

const base = (env: Env): HttpRateLimitOptions<any> => ({
  clock: env.clock,
  logger: env.logger,
  warnings: { limiterPerRequest: false },
  onDecision: (info) => {
    env.decisions.push(info);
  },
  onLimited: (info) => {
    env.limited.push(info);
  },
});

/** What a decision reports, for comparing a shadow rule's with an enforced one's. */
const figures = (info: RateLimitInfo) => ({
  decided: info.decision?.allowed,
  remaining: info.remaining,
  resetAt: info.resetAt,
  retryAfterMs: info.retryAfterMs,
  policies: info.policies,
});

/** The handler's view, where the target hands it the info (withRateLimit's test handler does not). */
const handlerSaw = (body: string): { outcome?: string; shadowPolicy?: string; enforced?: boolean } | null => JSON.parse(body).rateLimit;

const SCENARIOS: Scenario[] = [
  {
    name: "a shadow rule charges exactly what the enforced one does, and lets every request go on without headers",
    redis: true,
    options: () => ({
      rules: {
        "GET /api/shadow": { policy: perMinute(3), shadow: true },
        "GET /api/enforced": perMinute(3),
      },
    }),
    async run(app, env) {
      const shadow: number[] = [];
      const enforced: number[] = [];
      for (let i = 0; i < 5; i++) {
        const s = await app.send("/api/shadow");
        shadow.push(s.status);
        expect(hasRateLimitHeaders(s.headers)).toBe(false);
        expect(s.headers.has("retry-after")).toBe(false);
        const seen = handlerSaw(s.body);
        if (seen !== null) expect(seen.outcome).toBe(i < 3 ? "allowed" : "shadowLimited");
        enforced.push((await app.send("/api/enforced")).status);
        env.advance(1_000);
      }
      expect(shadow).toEqual([200, 200, 200, 200, 200]);
      expect(enforced).toEqual([200, 200, 200, 429, 429]);
      const shadowInfo = env.decisions.filter((d) => d.rule === "GET /api/shadow");
      const enforcedInfo = env.decisions.filter((d) => d.rule === "GET /api/enforced");
      // The same decisions, the same charges: a would-be denial charged nothing.
      expect(shadowInfo.map(figures)).toEqual(enforcedInfo.map(figures));
      expect(shadowInfo.map((d) => d.outcome)).toEqual(["allowed", "allowed", "allowed", "shadowLimited", "shadowLimited"]);
      expect(enforcedInfo.map((d) => d.outcome)).toEqual(["allowed", "allowed", "allowed", "limited", "limited"]);
      expect(shadowInfo.map((d) => [d.allowed, d.enforced])).toEqual(Array(5).fill([true, false]));
      expect(shadowInfo[3]!.shadowPolicy).toBe("3-per-1m");
      expect(enforcedInfo[0]!.shadowPolicy).toBeUndefined();
      expect(enforcedInfo[0]!.enforced).toBe(true);
      // onLimited is for requests refused.
      expect(env.limited.map((d) => d.rule)).toEqual(["GET /api/enforced", "GET /api/enforced"]);
    },
  },
  {
    name: "shadowHeaders sends the rate-limit headers of a shadow rule, never Retry-After",
    options: () => ({ policy: perMinute(1), shadow: true, shadowHeaders: true }),
    async run(app) {
      await app.send("/api/x");
      const reply = await app.send("/api/x");
      expect(reply.status).toBe(200);
      expect(ietfHeaders(reply.headers)).toEqual({ "1-per-1m": { q: 1, w: 60, r: 0, t: 60 } });
      expect(reply.headers.has("retry-after")).toBe(false);
    },
  },
  {
    name: "enforce: a stable fraction of clients by key, growing monotonically; the rest in shadow",
    options: () => ({
      key: byUser,
      rules: {
        "GET /api/none": { policy: perMinute(1), enforce: 0 },
        "GET /api/third": { policy: perMinute(1), enforce: 0.3 },
        "GET /api/most": { policy: perMinute(1), enforce: 0.7 },
        "GET /api/all": { policy: perMinute(1), enforce: 1 },
      },
    }),
    async run(app, env) {
      const users = Array.from({ length: 40 }, (_, i) => `user-${i}`);
      const limitedAt = async (path: string): Promise<Set<string>> => {
        const limited = new Set<string>();
        for (const u of users) {
          await app.send(path, user(u));
          // The second and third requests: both limited or both not, for the same client.
          const second = (await app.send(path, user(u))).status;
          const third = (await app.send(path, user(u))).status;
          expect(third).toBe(second);
          if (second === 429) limited.add(u);
        }
        return limited;
      };
      const none = await limitedAt("/api/none");
      const third = await limitedAt("/api/third");
      const most = await limitedAt("/api/most");
      const all = await limitedAt("/api/all");
      expect(none.size).toBe(0);
      expect(all.size).toBe(40);
      expect(third.size).toBeGreaterThan(0);
      expect(most.size).toBeGreaterThan(third.size);
      expect(most.size).toBeLessThan(40);
      // In at 30% means in at 70%.
      for (const u of third) expect(most.has(u)).toBe(true);
      // Every request was charged: the clients in shadow were counted as the enforced ones.
      const thirdInfo = env.decisions.filter((d) => d.rule === "GET /api/third");
      expect(thirdInfo.filter((d) => d.decision?.allowed === false)).toHaveLength(80);
      expect(thirdInfo.filter((d) => d.outcome === "shadowLimited")).toHaveLength(2 * (40 - third.size));
      for (const d of thirdInfo) expect(d.enforced).toBe(third.has(d.key));
    },
  },
  {
    name: "a shadow policy beside the enforced one never changes their decisions; it reports, and sends no header",
    redis: true,
    options: () => ({ policy: perMinute(5), shadowPolicy: perMinute(2, "strict") }),
    async run(app, env) {
      const statuses: number[] = [];
      for (let i = 0; i < 6; i++) {
        const reply = await app.send("/api/x");
        statuses.push(reply.status);
        expect(Object.keys(ietfHeaders(reply.headers))).toEqual(["5-per-1m"]);
      }
      expect(statuses).toEqual([200, 200, 200, 200, 200, 429]);
      expect(env.decisions.map((d) => d.outcome)).toEqual([
        "allowed",
        "allowed",
        "shadowLimited",
        "shadowLimited",
        "shadowLimited",
        "limited",
      ]);
      expect(env.decisions.map((d) => d.shadowPolicy)).toEqual([undefined, undefined, "strict", "strict", "strict", undefined]);
      expect(env.decisions.map((d) => d.remaining)).toEqual([4, 3, 2, 1, 0, 0]);
      // The shadow count: 2 charged, its would-be denials nothing.
      expect(env.decisions[4]!.shadow.map((p) => [p.policy, p.allowed, p.remaining])).toEqual([["strict", false, 0]]);
      expect(env.decisions[1]!.shadow.map((p) => [p.policy, p.allowed, p.remaining])).toEqual([["strict", true, 0]]);
    },
  },
  {
    name: "a refund by status gives back to the shadow policy what it charged, once",
    redis: true,
    options: () => ({ policy: perMinute(10), shadowPolicy: perMinute(2, "strict"), skipFailedRequests: true }),
    async run(app, env) {
      // Failed requests are refunded: from the enforced policy and from the shadow one alike.
      for (let i = 0; i < 4; i++) expect((await app.send("/api/x", { status: 500 })).status).toBe(500);
      await Promise.all(env.decisions.map((d) => d.pending));
      await app.send("/api/x");
      await app.send("/api/x");
      const third = await app.send("/api/x");
      expect(third.status).toBe(200);
      expect(env.decisions.slice(4).map((d) => d.outcome)).toEqual(["allowed", "allowed", "shadowLimited"]);
      expect(env.decisions.slice(4).map((d) => d.remaining)).toEqual([9, 8, 7]);
    },
  },
  {
    name: "warnAt: the request that crosses the threshold carries the warning, once per window",
    redis: true,
    options: () => ({ policy: perMinute(5), warnAt: 0.6 }),
    async run(app, env) {
      for (let i = 0; i < 6; i++) await app.send("/api/x");
      env.advance(60_000);
      for (let i = 0; i < 4; i++) await app.send("/api/x");
      const warned = env.decisions.map((d, i) => [i, d.warnings] as const).filter(([, w]) => w.length > 0);
      expect(warned.map(([i]) => i)).toEqual([2, 8]);
      expect(warned[0]![1]).toEqual([{ policy: "5-per-1m", threshold: 0.6, limit: 5, remaining: 2 }]);
    },
  },
  {
    name: "a rule's own warnAt and shadow override the middleware's",
    options: () => ({
      warnAt: 0.5,
      shadow: true,
      rules: { "GET /api/strict": { policy: perMinute(2), shadow: false, warnAt: { "2-per-1m": 1 } }, default: perMinute(2) },
    }),
    async run(app, env) {
      expect([(await app.send("/api/strict")).status, (await app.send("/api/strict")).status, (await app.send("/api/strict")).status])
        .toEqual([200, 200, 429]);
      expect([(await app.send("/api/other")).status, (await app.send("/api/other")).status, (await app.send("/api/other")).status])
        .toEqual([200, 200, 200]);
      expect(env.decisions.map((d) => d.warnings.length)).toEqual([0, 1, 0, 1, 0, 0]);
    },
  },
  {
    name: "onSkipped hears the requests not counted, with why",
    options: (env) => ({
      rules: { "GET /api/free": { policy: perMinute(1), cost: 0 }, "GET /api/x": perMinute(1) },
      skip: (req) => req.path.endsWith("/skipped"),
      allowList: ["vip"],
      key: (req) => req.header("x-user"),
      onSkipped: (req, reason) => {
        env.logs.push(`${reason} ${req.path}`);
      },
    }),
    async run(app, env) {
      await app.send("/api/skipped");
      await app.send("/api/x", user("vip"));
      await app.send("/api/free");
      await app.send("/api/x");
      expect(env.logs).toEqual(["skip /api/skipped", "allowList /api/x", "zeroCost /api/free"]);
      expect(env.decisions).toHaveLength(1);
    },
  },
];

const REFUSED: { name: string; options: Record<string, unknown>; message: string }[] = [
  { name: "enforce above 1", options: { enforce: 1.5 }, message: "`enforce`: received 1.5; expected a fraction of clients from 0 to 1" },
  { name: "shadow and enforce together", options: { shadow: true, enforce: 0.5 }, message: "`shadow: true` and `enforce` both given" },
  { name: "warnAt 0", options: { warnAt: 0 }, message: "`warnAt`: received 0; expected a fraction of the limit used" },
  {
    name: "a rule's misspelt option",
    options: { rules: { "GET /api/x": { policy: perMinute(1), shaddow: true } } },
    message: "did you mean `shadow`",
  },
  {
    name: "a warnAt naming no policy",
    options: { warnAt: { "1-per-1mn": 0.5 } },
    message: 'no policy is named "1-per-1mn" (did you mean "1-per-1m"?)',
  },
];

describe.each(TARGETS)("$name refuses rollout options", (target) => {
  it.each(REFUSED)("$name", async ({ options, message }) => {
    const started = target.start({ policy: perMinute(1), ...options } as HttpRateLimitOptions<any>);
    const error = await started.then(() => undefined, (e: unknown) => e);
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
