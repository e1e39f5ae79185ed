// The main example: the seed's tiered API on Hono + Node, in memory by default, on Upstash Redis
// when UPSTASH_REDIS_REST_URL and UPSTASH_REDIS_REST_TOKEN are set.
//   npm start            (from the repository root: builds, then runs this file)
//   PORT=8080 npm start
import { memoryStore, type RateLimitStore, tokenBucket, upstashStore } from "@floodgate/core";
import { rateLimit, type RateLimitEnv } from "@floodgate/hono";
import { serve } from "@hono/node-server";
import { getConnInfo } from "@hono/node-server/conninfo";
import { Redis } from "@upstash/redis";
import { Hono } from "hono";

const env = globalThis.process?.env ?? {};
const onUpstash = Boolean(env.UPSTASH_REDIS_REST_URL && env.UPSTASH_REDIS_REST_TOKEN);
const store: RateLimitStore = onUpstash ? upstashStore({ redis: Redis.fromEnv() }) : memoryStore();

const app = new Hono<RateLimitEnv>();
app.use(
  "/api/*",
  rateLimit({
    store,
    getConnInfo,
    rules: {
      "GET /api/status": tokenBucket({ capacity: 1000, refillRate: 100, name: "status" }),
      "GET /api/search": tokenBucket({ capacity: 20, refillRate: 5, name: "search" }),
      "* /api/orders/*": tokenBucket({ capacity: 10, refillRate: 2, name: "orders" }),
      "POST /api/login": tokenBucket({ capacity: 5, refillRate: 1, name: "login" }),
      default: tokenBucket({ capacity: 100, refillRate: 20, name: "api" }),
    },
    // Redis is remote: give up on it after 500 ms, and limit locally meanwhile.
    onStoreError: "fallback",
    timeoutMs: onUpstash ? 500 : undefined,
  }),
);

app.get("/api/status", (c) => c.json({ ok: true }));
app.get("/api/search", (c) => c.json({ query: c.req.query("q") ?? "", results: [] }));
app.get("/api/orders/:id", (c) => c.json({ id: c.req.param("id"), status: "shipped" }));
app.post("/api/orders", (c) => c.json({ id: "42" }, 201));
app.post("/api/login", (c) => c.json({ token: "demo" }));
app.get("/api/*", (c) => c.json({ path: c.req.path, remaining: c.get("rateLimit")?.remaining }));

const port = Number(env.PORT ?? 3000);
serve({ fetch: app.fetch, port, hostname: env.HOST ?? "127.0.0.1" }, (info) => {
  const base = `http://127.0.0.1:${info.port}`;
  console.log(`Floodgate example API (${onUpstash ? "Upstash Redis" : "in-memory"} store) listening on ${base}
Try:
  curl -i ${base}/api/status
  curl -i "${base}/api/search?q=floodgate"
  for i in $(seq 1 7); do curl -s -o /dev/null -w "%{http_code}\\n" -X POST ${base}/api/login; done   # 5 × 200, then 429
  curl -i -X POST ${base}/api/login   # the 429: Retry-After, RateLimit-Policy, RateLimit, X-RateLimit-*`);
});
