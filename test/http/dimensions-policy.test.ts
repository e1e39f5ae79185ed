// A dimension whose `policy` is a function of the request (per-plan limits, a monthly quota whose
// billing day comes from the customer), through Hono, Express and withRateLimit on the memory
// store: each policy set counts in its own namespace, the compound decision is made over the
// limiters the request chose, and refunds go back where the request was charged. Time is injected.
import {
  calendarWindow,
  concurrency,
  dimensions,
  fixedWindow,
  FloodgateError,
  type HttpRateLimitOptions,
  type Policy,
  type RateLimitInfo,
  withRateLimit,
} from "@floodgate/core";
import { afterEach, describe, expect, it } from "vitest";
import { createEnv, type Env, T0 } from "./support.ts";
import { type App, TARGETS } from "./targets.ts";

const PLANS: Record<string, Policy> = {
  free: fixedWindow({ limit: 2, window: "1m", name: "free" }),
  pro: fixedWindow({ limit: 4, window: "1m", name: "pro" }),
};
const perPlan = () =>
  dimensions({
    user: { key: (req) => req.header("x-user"), policy: fixedWindow({ limit: 100, window: "1m" }) },
    org: { key: (req) => req.header("x-org"), policy: (req) => PLANS[req.header("x-plan") ?? ""]! },
  });
const as = (org: string, plan: string, status?: number) => ({
  headers: { "x-user": `${org}-user`, "x-org": org, "x-plan": plan },
  ...(status === undefined ? {} : { status }),
});

const base = (env: Env): HttpRateLimitOptions<any> => ({
  clock: env.clock,
  logger: env.logger,
  onDecision: (info) => {
    env.decisions.push(info);
  },
});
const last = (env: Env): RateLimitInfo => env.decisions[env.decisions.length - 1]!;

const statuses = async (app: App, n: number, options: ReturnType<typeof as>) => {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push((await app.send("/api/x", options)).status);
  return out;
};

describe.each(TARGETS.filter((t) => ["hono", "express", "fetch"].includes(t.name)))("$name", (target) => {
  let app: App | undefined;
  afterEach(async () => {
    await app?.close();
    app = undefined;
  });

  it("two customers on different plans get their own limits and never share counts", async () => {
    const env = createEnv();
    // An explicit prefix too: each plan still counts in a namespace of its own.
    app = await target.start({ ...base(env), prefix: "api:", rules: { "GET /api/*": { dimensions: perPlan() } } });
    expect(await statuses(app, 3, as("acme", "free"))).toEqual([200, 200, 429]);
    expect(last(env).dimension).toBe("org");
    expect(last(env).dimensions!.org!.limit).toBe(2);
    expect(await statuses(app, 5, as("globex", "pro"))).toEqual([200, 200, 200, 200, 429]);
    expect(last(env).dimensions!.org!.limit).toBe(4);
    // acme upgrades: the pro plan's counters are its own, not the free plan's.
    expect(await statuses(app, 5, as("acme", "pro"))).toEqual([200, 200, 200, 200, 429]);
    expect(await statuses(app, 1, as("acme", "free"))).toEqual([429]);
    expect(last(env).dimensions!.user!.remaining).toBe(100 - 6);
  });

  it("a monthly calendar window per org resets at each org's own cycle end", async () => {
    const env = createEnv(); // T0 is 2023-11-14T22:34:00Z
    const ORGS: Record<string, Policy> = {
      acme: calendarWindow({ limit: 2, period: "month", timeZone: "UTC", billingDay: 20, name: "monthly" }),
      globex: calendarWindow({ limit: 2, period: "month", timeZone: "UTC", billingDay: 5, name: "monthly" }),
    };
    const quotas = dimensions({
      org: { key: (req) => req.header("x-org"), policy: (req) => ORGS[req.header("x-org")!]! },
    });
    app = await target.start({ ...base(env), rules: { "GET /api/*": { dimensions: quotas } } });
    const acmeEnd = Date.parse("2023-11-20T00:00:00Z");
    const globexEnd = Date.parse("2023-12-05T00:00:00Z");
    expect(T0).toBeLessThan(acmeEnd);
    expect(await statuses(app, 3, as("acme", "free"))).toEqual([200, 200, 429]);
    expect(last(env).dimensions!.org!.resetAt).toBe(acmeEnd);
    expect(await statuses(app, 3, as("globex", "free"))).toEqual([200, 200, 429]);
    expect(last(env).dimensions!.org!.resetAt).toBe(globexEnd);
    env.now = acmeEnd; // acme's new cycle; globex's goes on
    expect(await statuses(app, 1, as("acme", "free"))).toEqual([200]);
    expect(last(env).dimensions!.org!.resetAt).toBe(Date.parse("2023-12-20T00:00:00Z"));
    expect(await statuses(app, 1, as("globex", "free"))).toEqual([429]);
    env.now = globexEnd;
    expect(await statuses(app, 1, as("globex", "free"))).toEqual([200]);
  });

  it("a refund of a failed request reaches the per-plan limiter it was charged on", async () => {
    const env = createEnv();
    app = await target.start({ ...base(env), rules: { "GET /api/*": { dimensions: perPlan() } }, skipFailedRequests: true });
    expect(await statuses(app, 1, as("acme", "free"))).toEqual([200]);
    for (let i = 0; i < 3; i++) {
      expect((await app.send("/api/x", as("acme", "free", 500))).status).toBe(500);
      await app.handle.flush();
      expect(last(env).dimensions!.org!.remaining).toBe(0); // charged on the way in, given back after
    }
    expect(await statuses(app, 2, as("acme", "free"))).toEqual([200, 429]);
    // The pro plan's limiter of the same org was never charged by the refunded requests.
    expect(await statuses(app, 5, as("acme", "pro"))).toEqual([200, 200, 200, 200, 429]);
  });
  it("a concurrency unit is held and released in the per-plan limiter the request chose", async () => {
    const env = createEnv();
    const HELD: Record<string, Policy> = { free: concurrency({ limit: 1, name: "free" }), pro: concurrency({ limit: 3, name: "pro" }) };
    const quotas = dimensions({
      org: { key: (req) => req.header("x-org"), policy: (req) => HELD[req.header("x-plan")!]! },
    });
    app = await target.start({ ...base(env), rules: { "GET /api/*": { dimensions: quotas } } });
    for (const [plan, limit] of [["free", 1], ["pro", 3], ["free", 1]] as const) {
      for (let i = 0; i < 3; i++) {
        expect((await app.send("/api/x", as("acme", plan))).status).toBe(200);
        await app.handle.flush();
        // One in flight while deciding, none held from the requests before.
        expect(last(env).dimensions!.org).toMatchObject({ limit, remaining: limit - 1 });
      }
    }
  });
});

describe("a dimension's policy function that builds its policies per request", () => {
  it("shares the counters of their figures and is warned about once; sets built once are not", async () => {
    const logs: string[] = [];
    const handler = withRateLimit(() => new Response("ok"), {
      rules: {
        "GET /api/*": {
          dimensions: dimensions({ org: { key: () => "acme", policy: () => fixedWindow({ limit: 30, window: "1m" }) } }),
        },
        "GET /plans/*": { dimensions: perPlan() },
      },
      getClientIp: () => "192.0.2.1",
      logger: { warn: (m) => logs.push(m) },
    });
    const statuses: number[] = [];
    for (let i = 0; i < 31; i++) statuses.push((await handler(new Request("http://x/api/x"))).status);
    expect(statuses.slice(0, 30).every((s) => s === 200)).toBe(true);
    expect(statuses[30]).toBe(429);
    const warned = logs.filter((l) => l.includes("policyPerRequest"));
    expect(warned).toHaveLength(1);
    expect(warned[0]).toContain('dimension "org" of rule "GET /api/*"');
    for (let i = 0; i < 40; i++) {
      const plan = i % 2 === 0 ? "free" : "pro";
      await handler(new Request("http://x/plans/x", { headers: { "x-org": `o${i}`, "x-plan": plan } }));
    }
    expect(logs.filter((l) => l.includes("policyPerRequest"))).toHaveLength(1);
  });
});

describe("a dimension's policy function that answers with a promise", () => {
  it("is awaited, and each plan keeps its own limit", async () => {
    const handler = withRateLimit(() => new Response("ok"), {
      rules: {
        "GET /api/*": {
          dimensions: dimensions({
            org: { key: (req) => req.header("x-org"), policy: async (req) => PLANS[req.header("x-plan") ?? ""]! },
          }),
        },
      },
    });
    const call = (plan: string) => handler(new Request("http://x/api/x", { headers: { "x-org": "acme", "x-plan": plan } }));
    const free: number[] = [];
    for (let i = 0; i < 3; i++) free.push((await call("free")).status);
    expect(free).toEqual([200, 200, 429]);
    const pro: number[] = [];
    for (let i = 0; i < 5; i++) pro.push((await call("pro")).status);
    expect(pro).toEqual([200, 200, 200, 200, 429]);
  });
});

describe("a dimension's policy function that returns something else", () => {
  it("names the dimension and what it accepts; the request is not counted", async () => {
    const handler = withRateLimit(() => new Response("ok"), {
      rules: {
        "GET /api/*": {
          dimensions: dimensions({
            user: { policy: fixedWindow({ limit: 5, window: "1m" }) },
            org: { key: () => "acme", policy: (() => "gold") as never },
          }),
        },
      },
      warnings: false,
    });
    const rejected = handler(new Request("http://x/api/x"));
    await expect(rejected).rejects.toThrow(FloodgateError);
    await expect(rejected).rejects.toMatchObject({
      code: "INVALID_ARGUMENT",
      message: expect.stringMatching(
        /the `policy` function of dimension "org" of rule "GET \/api\/\*" returned "gold"; it must return a policy/,
      ),
    });
  });

  it("a value whose dimension's policy is a function has no one compound limiter to give", () => {
    const quotas = perPlan();
    withRateLimit(() => new Response("ok"), { rules: { "GET /api/*": { dimensions: quotas } } });
    expect(() => quotas.limiter()).toThrow("a compound limiter per policy set");
  });

  it("is told apart from a value that is neither a policy nor a function", () => {
    expect(() => dimensions({ org: { policy: 5 as never } })).toThrow(
      /dimension "org": option `policy` is 5; expected .*, or a function of the request returning them/,
    );
  });
});
