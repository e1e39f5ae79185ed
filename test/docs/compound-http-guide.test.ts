/**
 * The middleware section of docs/compound-limits.md, as written there (the test checks that the
 * guide still holds these lines): the rule's dimensions, and the headers the guide shows for its
 * first request, read from a Hono app made of those lines.
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { dimensions, fixedWindow, memoryStore, type RateLimitInfo, slidingWindow, tokenBucket } from "@floodgate/core";
import { rateLimit, type RateLimitEnv } from "@floodgate/hono";
import { Hono } from "hono";
import { expect, it } from "vitest";

const GUIDE = readFileSync(fileURLToPath(new URL("../../docs/compound-limits.md", import.meta.url)), "utf8");

const RULE = `      "POST /api/*": {
        dimensions: dimensions({
          user: { key: (req) => req.header("x-user-id"), policy: slidingWindow({ limit: 100, window: "1m" }) },
          org: { key: (req) => req.header("x-org-id"), policy: fixedWindow({ limit: 10_000, window: "1d" }) },
          ip: { policy: tokenBucket({ capacity: 20, refillRate: 20 }) }, // no key: the client's address
          global: { key: () => "all", policy: fixedWindow({ limit: 5_000, window: "1s" }) },
        }),
      },`;

const HEADERS = `RateLimit-Policy: "user";q=100;w=60, "org";q=10000;w=86400, "ip";q=20;w=1, "global";q=5000;w=1
RateLimit: "user";r=99;t=120, "org";r=9999;t=43200, "ip";r=19;t=1, "global";r=4999;t=1
X-RateLimit-Limit: 20
X-RateLimit-Remaining: 19`;

/** The guide's app, on a clock at noon UTC (its minute, day and second all start then). */
function guideApp() {
  const app = new Hono<RateLimitEnv>();
  const store = memoryStore();
  app.use(
    "/api/*",
    rateLimit({
      store,
      getConnInfo: () => ({ remote: { address: "203.0.113.7" } }),
      clock: () => Date.UTC(2026, 0, 1, 12),
      rules: {
        "POST /api/*": {
          dimensions: dimensions({
            user: { key: (req) => req.header("x-user-id"), policy: slidingWindow({ limit: 100, window: "1m" }) },
            org: { key: (req) => req.header("x-org-id"), policy: fixedWindow({ limit: 10_000, window: "1d" }) },
            ip: { policy: tokenBucket({ capacity: 20, refillRate: 20 }) }, // no key: the client's address
            global: { key: () => "all", policy: fixedWindow({ limit: 5_000, window: "1s" }) },
          }),
        },
      },
    }),
  );
  app.post("/api/completions", (c) => {
    const info = c.get("rateLimit");
    return c.json({ orgLeftToday: info.dimensions?.org?.remaining, closest: info.dimension });
  });
  return app;
}

it("the guide's rule, handler and headers are the ones tested here", () => {
  expect(GUIDE).toContain(RULE);
  expect(GUIDE).toContain(`return c.json({ orgLeftToday: info.dimensions?.org?.remaining, closest: info.dimension });`);
  expect(GUIDE).toContain(HEADERS);
});

const HANDLE = `const quotas = dimensions({
  user: { key: (req) => req.header("x-user-id"), policy: slidingWindow({ limit: 100, window: "1m" }) },
  org: { key: (req) => req.header("x-org-id"), policy: fixedWindow({ limit: 10_000, window: "1d" }) },
});
app.use("/api/*", rateLimit({ rules: { "POST /api/*": { dimensions: quotas } } }));`;

it("the guide's handle section: the value's limiter() refunds a request's charge and resets a dimension's key", async () => {
  expect(GUIDE).toContain(HANDLE);
  expect(GUIDE).toContain("await quotas.refund(info);");
  expect(GUIDE).toContain(`await quotas.limiter().dimensions.user.reset("u_42");`);
  const app = new Hono<RateLimitEnv>();
  const quotas = dimensions({
    user: { key: (req) => req.header("x-user-id"), policy: slidingWindow({ limit: 100, window: "1m" }) },
    org: { key: (req) => req.header("x-org-id"), policy: fixedWindow({ limit: 10_000, window: "1d" }) },
  });
  app.use(
    "/api/*",
    rateLimit({ rules: { "POST /api/*": { dimensions: quotas } }, getConnInfo: () => ({ remote: { address: "203.0.113.7" } }) }),
  );
  let info: RateLimitInfo | undefined;
  app.post("/api/x", (c) => {
    info = c.get("rateLimit");
    return c.text("ok");
  });
  const send = () => app.request("/api/x", { method: "POST", headers: { "x-user-id": "u_42", "x-org-id": "acme" } });
  await send();
  await send();
  expect(info!.dimensions!.user!.remaining).toBe(98);
  await quotas.refund(info!);
  await quotas.limiter().dimensions.user.reset("u_42");
  const read = await quotas.limiter().peek({ user: "u_42", org: "acme" });
  // The user's minute cleared; the organisation's day got the second request back.
  expect([read.dimensions.user.remaining, read.dimensions.org.remaining]).toEqual([100, 9_999]);
});

it("the first request answers the headers the guide shows; the IP's bucket refuses the 21st, charging no one", async () => {
  const app = guideApp();
  const send = () => app.request("/api/completions", { method: "POST", headers: { "x-user-id": "u_42", "x-org-id": "acme" } });
  const first = await send();
  const shown = HEADERS.split("\n").map((line) => line.split(": "));
  for (const [name, value] of shown) expect(first.headers.get(name!)).toBe(value);
  expect(await first.json()).toEqual({ orgLeftToday: 9_999, closest: "ip" });
  for (let i = 0; i < 19; i++) expect((await send()).status).toBe(200);
  const refused = await send();
  expect(refused.status).toBe(429);
  expect(refused.headers.get("ratelimit")).toMatch(/^"user";r=80;t=\d+, "org";r=9980;t=\d+, "ip";r=0;t=1, "global";r=4980;t=\d+$/);
});
