// A Cloudflare Worker: Hono + @floodgate/hono, with limits kept in Durable Objects (one object per
// client key), exact across every isolate and location. The Worker exports the object class it
// binds as RATE_LIMITER (wrangler.jsonc).
//   npx wrangler dev   (from examples/cloudflare-durable-objects)
import { Hono } from "hono";
import { rateLimit, type RateLimitEnv } from "@floodgate/hono";
import { slidingWindow } from "@floodgate/core";
import { durableObjectStore, type RateLimiterNamespace } from "@floodgate/cloudflare";

export { RateLimiterObject } from "@floodgate/cloudflare";

interface Env {
  RATE_LIMITER: RateLimiterNamespace;
}

const app = new Hono<{ Bindings: Env } & RateLimitEnv>();
// The binding comes with the first request's env; the middleware is made once, then reused.
let limiter: ReturnType<typeof rateLimit<{ Bindings: Env }>> | undefined;
app.use("*", (c, next) => {
  limiter ??= rateLimit<{ Bindings: Env }>({
    policy: slidingWindow({ limit: 5, window: "1m" }),
    store: durableObjectStore({ namespace: c.env.RATE_LIMITER }),
    trustProxy: "cloudflare", // the client address is CF-Connecting-IP
  });
  return limiter(c, next);
});
app.get("/", (c) => c.json({ hello: "worker", store: "durable-objects" }));

export default app;
