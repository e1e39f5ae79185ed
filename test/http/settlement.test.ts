// Costs settled after the response, in-flight (concurrency) limits and `info.pending`, through
// every integration (settle-targets.ts) on every kind of store: memory, TCP Redis (ioredis) and
// Upstash (through the local bridge on a real redis-server). What is checked is what the store
// holds once `info.pending` has resolved, read back with `peek()` through another limiter.
import {
  concurrency,
  createRateLimiter,
  fixedWindow,
  type HttpRateLimitOptions,
  memoryStore,
  type Policy,
  type RateLimitInfo,
  type RateLimitStore,
  redisStore,
  upstashStore,
} from "@floodgate/core";
import { startUpstashBridge, type UpstashBridge } from "@floodgate/upstash-local";
import { Redis as UpstashRedis } from "@upstash/redis";
import { Redis as IORedis } from "ioredis";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type RedisInstance, startRedis } from "../support/redis-server.ts";
import { SETTLE_TARGETS, type SettleApp } from "./settle-targets.ts";

const KEY = "caller-1";
let prefixes = 0;

interface Env {
  /** Every decision so far. */
  decisions: RateLimitInfo[];
  logs: string[];
  /** Waits for every decision's `pending`. */
  settled(): Promise<void>;
  /** Units held per policy name (limit − remaining), once everything pending has settled. */
  used(): Promise<Record<string, number>>;
}

interface Scenario {
  name: string;
  policy: Policy | Policy[];
  options?: Partial<HttpRateLimitOptions<any>>;
  /** Returned by onDecision, after recording the decision. */
  hook?: (info: RateLimitInfo) => Promise<unknown>;
  run(app: SettleApp, env: Env): Promise<void>;
}

const hour = (limit: number, name = "units") => fixedWindow({ limit, window: "1h", name });

let hookDone = 0;
let actualsStarted = 0;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const seenPending: Promise<void>[] = [];
/** The running scenario's store, read without waiting for anything pending. */
let env0: { peek(): Promise<Record<string, number>> } | undefined;

const SCENARIOS: Scenario[] = [
  {
    name: "pending: a skipSuccessfulRequests refund of a plain cost is done when pending resolves",
    policy: hour(100),
    options: { skipSuccessfulRequests: true },
    async run(app, env) {
      await app.send("/api/x?chunks=2");
      expect(await env.used()).toEqual({ units: 0 });
      await app.send("/api/x?status=500");
      expect(await env.used()).toEqual({ units: 1 });
    },
  },
  {
    name: "pending, as onDecision already sees it, waits for the settlement at the response's end",
    policy: hour(100),
    options: { cost: { estimate: 10 } },
    hook: (info) => {
      seenPending.push(info.pending);
      return Promise.resolve();
    },
    async run(app) {
      const before = seenPending.length;
      await app.send("/api/x?chunks=2&each=1");
      await seenPending[before];
      const peeked = env0!.peek();
      expect(await peeked).toEqual({ units: 2 });
    },
  },
  {
    name: "pending: a promise onDecision returns joins it; a request with nothing left has it resolved",
    policy: hour(100),
    hook: () => new Promise((resolve) => setTimeout(resolve, 50)).then(() => hookDone++),
    async run(app, env) {
      const before = hookDone;
      await app.send("/api/x");
      await env.decisions[0]!.pending;
      expect(hookDone).toBe(before + 1);
    },
  },
  {
    name: "the estimate is reserved up front and the handler's report settled in its place",
    policy: hour(100),
    options: { cost: { estimate: 10 } },
    async run(app, env) {
      const reply = await app.send("/api/x?report=3");
      expect(reply.status).toBe(200);
      // Headers tell what the reservation left: the estimate was held when they were written.
      expect(env.decisions[0]!.remaining).toBe(90);
      expect(await env.used()).toEqual({ units: 3 });
    },
  },
  {
    name: "actual reads the response as sent; undefined falls back to the report",
    policy: hour(100),
    options: {
      cost: { estimate: 10, actual: (_req, res) => (res.header("x-usage") === undefined ? undefined : Number(res.header("x-usage"))) },
    },
    async run(app, env) {
      await app.send("/api/x?usage=7&report=2");
      expect(await env.used()).toEqual({ units: 7 });
      await app.send("/api/x?report=2");
      expect(await env.used()).toEqual({ units: 9 });
    },
  },
  {
    name: "without a report or an actual answer, the estimate stays charged",
    policy: hour(100),
    options: { cost: { estimate: (req) => Number(req.header("x-estimate") ?? 10) } },
    async run(app, env) {
      await app.send("/api/x", { headers: { "x-estimate": "12" } });
      expect(await env.used()).toEqual({ units: 12 });
    },
  },
  {
    name: "usage above the estimate is charged past the limit; later requests wait",
    policy: hour(100),
    options: { cost: { estimate: 10 } },
    async run(app, env) {
      expect((await app.send("/api/x?report=150")).status).toBe(200);
      expect(await env.used()).toEqual({ units: 100 });
      expect((await app.send("/api/x")).status).toBe(429);
      expect(await env.used()).toEqual({ units: 100 });
    },
  },
  {
    name: "a streamed body is settled when it has been sent to the end",
    policy: hour(100),
    options: { cost: { estimate: 10 } },
    async run(app, env) {
      const reply = await app.send("/api/x?chunks=3&each=1");
      expect(reply.body).toBe("chunk 1\nchunk 2\nchunk 3\n");
      expect(await env.used()).toEqual({ units: 3 });
    },
  },
  {
    name: "a stream the client aborts settles what the handler reported so far",
    policy: hour(100),
    options: { cost: { estimate: 10 } },
    async run(app, env) {
      const reply = await app.send("/api/x?chunks=5&each=1", { abortAfter: 2 });
      expect(reply.body).toBe("chunk 1\nchunk 2\n");
      expect(await env.used()).toEqual({ units: 2 });
    },
  },
  {
    name: "a stream aborted with nothing reported settles the estimate; actual is not asked",
    policy: hour(100),
    options: { cost: { estimate: 10, actual: () => 1 } },
    async run(app, env) {
      await app.send("/api/x?chunks=5", { abortAfter: 1 });
      expect(await env.used()).toEqual({ units: 10 });
    },
  },
  {
    name: "a handler that throws settles its report, else the estimate",
    policy: hour(100),
    options: { cost: { estimate: 10 } },
    async run(app, env) {
      expect((await app.send("/api/x?fail=1&report=4")).status).toBe(500);
      expect(await env.used()).toEqual({ units: 4 });
      expect((await app.send("/api/x?fail=1")).status).toBe(500);
      expect(await env.used()).toEqual({ units: 14 });
    },
  },
  {
    name: "a handler that throws settles its report, else the estimate, never what actual reads off the error page",
    policy: hour(100),
    options: { cost: { estimate: 10, actual: () => 1 } },
    async run(app, env) {
      expect((await app.send("/api/x?fail=1&report=4")).status).toBe(500);
      expect(await env.used()).toEqual({ units: 4 });
      expect((await app.send("/api/x?fail=1")).status).toBe(500);
      expect(await env.used()).toEqual({ units: 14 });
    },
  },
  {
    name: "a body that fails on the way settles the report, not actual",
    policy: hour(100),
    options: { cost: { estimate: 10, actual: () => 1 } },
    async run(app, env) {
      await app.send("/api/x?chunks=3&each=1&broken=2").catch(() => undefined);
      expect(await env.used()).toEqual({ units: 2 });
    },
  },
  {
    name: "a denial reserves nothing, and the reservation held meanwhile settles as reported",
    policy: hour(20),
    options: { cost: { estimate: 15 } },
    async run(app, env) {
      const first = app.send("/api/x?chunks=3&each=1");
      await waitFor(() => env.decisions.length === 1);
      expect((await app.send("/api/x")).status).toBe(429);
      expect((await first).status).toBe(200);
      expect(await env.used()).toEqual({ units: 3 });
      expect((await app.send("/api/x?report=5")).status).toBe(200);
      expect(await env.used()).toEqual({ units: 8 });
    },
  },
  {
    name: "skipSuccessfulRequests cancels the reservation of a success; a failure settles",
    policy: hour(100),
    options: { cost: { estimate: 10 }, skipSuccessfulRequests: true },
    async run(app, env) {
      await app.send("/api/x?report=3");
      expect(await env.used()).toEqual({ units: 0 });
      await app.send("/api/x?report=3&status=503");
      expect(await env.used()).toEqual({ units: 3 });
    },
  },
  {
    name: "an actual that throws or answers nonsense is logged; the report is settled",
    policy: hour(100),
    options: {
      cost: {
        estimate: 10,
        actual: (_req, res) => {
          if (res.status === 201) throw new Error("no usage");
          return -1;
        },
      },
    },
    async run(app, env) {
      await app.send("/api/x?report=2&status=201");
      await app.send("/api/x?report=3");
      expect(await env.used()).toEqual({ units: 5 });
      expect(env.logs.join("\n")).toContain("The cost's `actual` threw");
      expect(env.logs.join("\n")).toContain("returned -1");
    },
  },
  {
    name: "concurrency: 2 in flight, the third refused (qu=concurrent-requests), units back when the responses end",
    policy: [concurrency({ limit: 2, name: "in-flight" }), hour(100, "requests")],
    async run(app, env) {
      const streams = [app.send("/api/x?chunks=3"), app.send("/api/x?chunks=3")];
      await waitFor(() => env.decisions.length === 2);
      const refused = await app.send("/api/x");
      expect(refused.status).toBe(429);
      expect(env.decisions[2]!.policy).toBe("in-flight");
      expect(refused.headers.get("ratelimit-policy")).toBe('"in-flight";q=2;qu="concurrent-requests", "requests";q=100;w=3600');
      expect(refused.headers.get("ratelimit")).toMatch(/^"in-flight";r=0;t=\d+, "requests";r=98;t=\d+$/);
      expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
      await Promise.all(streams);
      expect(await env.used()).toEqual({ "in-flight": 0, requests: 2 });
      expect((await app.send("/api/x")).status).toBe(200);
      expect(await env.used()).toEqual({ "in-flight": 0, requests: 3 });
    },
  },
  {
    name: "concurrency: a client abort and a handler that throws release their units",
    policy: [concurrency({ limit: 1, name: "in-flight" }), hour(100, "requests")],
    async run(app, env) {
      await app.send("/api/x?chunks=5", { abortAfter: 1 });
      expect(await env.used()).toEqual({ "in-flight": 0, requests: 1 });
      expect((await app.send("/api/x?fail=1")).status).toBe(500);
      expect(await env.used()).toEqual({ "in-flight": 0, requests: 2 });
      expect((await app.send("/api/x")).status).toBe(200);
    },
  },
  {
    name: "concurrency with a settled cost: one unit in flight, the estimate to the budget, settled as reported",
    policy: [concurrency({ limit: 2, name: "in-flight" }), hour(1000, "tokens")],
    options: { cost: { estimate: 100 } },
    async run(app, env) {
      const stream = app.send("/api/x?chunks=2&each=1");
      await waitFor(() => env.decisions.length === 1);
      expect(env.decisions[0]!.policies.map((p) => [p.policy, p.remaining])).toEqual([["in-flight", 1], ["tokens", 900]]);
      await stream;
      expect(await env.used()).toEqual({ "in-flight": 0, tokens: 2 });
    },
  },
  {
    name: "flush(): a settlement still under way when the client has its answer is done when flush() resolves",
    policy: hour(100),
    options: {
      cost: {
        estimate: 10,
        actual: async () => {
          actualsStarted++;
          await sleep(400);
          return 4;
        },
      },
    },
    async run(app) {
      const before = actualsStarted;
      const reply = await app.send("/api/x?chunks=2");
      expect(reply.body).toBe("chunk 1\nchunk 2\n");
      await waitFor(() => actualsStarted > before);
      expect(await env0!.peek()).toEqual({ units: 10 });
      await app.flush();
      expect(await env0!.peek()).toEqual({ units: 4 });
    },
  },
  {
    name: "flush(): a promise a hook returned has settled when flush() resolves",
    policy: hour(100),
    hook: () => sleep(300).then(() => hookDone++),
    async run(app) {
      const before = hookDone;
      await app.send("/api/x");
      expect(hookDone).toBe(before);
      await app.flush();
      expect(hookDone).toBe(before + 1);
      // Nothing outstanding: it resolves at once.
      await app.flush();
    },
  },
  {
    name: "flush(): concurrency units released and skipSuccessfulRequests refunds done, without reading pending",
    policy: [concurrency({ limit: 2, name: "in-flight" }), hour(100, "requests")],
    options: { skipSuccessfulRequests: true },
    async run(app) {
      await Promise.all([app.send("/api/x?chunks=2"), app.send("/api/x?status=500"), app.send("/api/x")]);
      await app.flush();
      expect(await env0!.peek()).toEqual({ "in-flight": 0, requests: 1 });
    },
  },
];

async function waitFor(condition: () => boolean, timeoutMs = 5000): Promise<void> {
  const started = Date.now();
  while (!condition()) {
    if (Date.now() - started > timeoutMs) throw new Error("timed out waiting");
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

interface StoreFixture {
  store: RateLimitStore;
  close(): Promise<void>;
}

const STORES: [string, () => Promise<StoreFixture>][] = [
  ["memory", async () => ({ store: memoryStore(), close: async () => {} })],
  ["ioredis", async () => {
    const redis = await startRedis();
    const client = new IORedis(redis.port, redis.host);
    return {
      store: redisStore({ client }),
      async close() {
        client.disconnect();
        await redis.stop();
      },
    };
  }],
  ["upstash (bridge)", async () => {
    const redis: RedisInstance = await startRedis();
    const bridge: UpstashBridge = await startUpstashBridge({ redis: { host: redis.host, port: redis.port } });
    const client = new UpstashRedis({ url: bridge.url, token: bridge.token, enableTelemetry: false });
    return {
      store: upstashStore({ redis: client }),
      async close() {
        await bridge.stop();
        await redis.stop();
      },
    };
  }],
];

describe.each(STORES)("on %s", (_storeName, open) => {
  let fixture: StoreFixture;
  beforeAll(async () => {
    fixture = await open();
  });
  afterAll(async () => {
    await fixture?.close();
  });

  describe.each(SETTLE_TARGETS)("$name", (target) => {
    let app: SettleApp | undefined;
    afterEach(async () => {
      await app?.close();
      app = undefined;
    });

    it.each(SCENARIOS)("$name", async (scenario) => {
      const prefix = `settle${++prefixes}:`;
      const decisions: RateLimitInfo[] = [];
      const logs: string[] = [];
      const peeker = createRateLimiter({ policy: scenario.policy, store: fixture.store, prefix, resilience: false });
      const peekNow = async () => {
        const decision = await peeker.peek(KEY);
        return Object.fromEntries(decision.policies.map((p) => [p.policy, p.limit - p.remaining]));
      };
      env0 = { peek: peekNow };
      const env: Env = {
        decisions,
        logs,
        settled: async () => {
          await Promise.all(decisions.map((d) => d.pending));
        },
        async used() {
          await env.settled();
          return peekNow();
        },
      };
      app = await target.start({
        store: fixture.store,
        prefix,
        policy: scenario.policy,
        key: () => KEY,
        logger: { warn: (message: string) => logs.push(message) },
        warnings: { limiterPerRequest: false, doubleCount: false },
        onDecision: (info: RateLimitInfo) => {
          decisions.push(info);
          return scenario.hook?.(info);
        },
        ...scenario.options,
      });
      await scenario.run(app, env);
    });
  });
});
