// Worker (a): Hono + @floodgate/hono + upstashStore, everything created at global scope.
// The bridge's URL and token are inlined at bundle time (esbuild `define`).
import { globalScope } from "./global-scope-guard.ts";
import { Hono } from "hono";
import { Redis } from "@upstash/redis/cloudflare";
import { rateLimit, type RateLimitEnv } from "@floodgate/hono";
import { tokenBucket, upstashStore } from "@floodgate/core";

declare const __BRIDGE_URL__: string;
declare const __BRIDGE_TOKEN__: string;

const redis = new Redis({ url: __BRIDGE_URL__, token: __BRIDGE_TOKEN__, enableTelemetry: false });
const app = new Hono<RateLimitEnv>();
app.get("/__global-scope", (c) => c.json({ calls: globalScope.calls }));
app.use(
  "/api/*",
  rateLimit({
    // 3 requests, then one more every 20 minutes: the test hits the limit with no waiting.
    policy: tokenBucket({ capacity: 3, refillRate: 3 / 3600, name: "api" }),
    store: upstashStore({ redis }),
    trustProxy: "cloudflare",
  }),
);
app.get("/api/hello", (c) => c.json({ hello: "workerd", remaining: c.get("rateLimit").remaining }));

globalScope.done();
export default app;
