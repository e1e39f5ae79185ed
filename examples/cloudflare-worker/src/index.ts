// A Cloudflare Worker: Hono + @floodgate/hono. With UPSTASH_REDIS_REST_URL/TOKEN set, limits are
// shared through Upstash Redis; without them, each isolate limits on its own in memory.
//   npx wrangler dev   (from examples/cloudflare-worker)
import { Hono } from "hono";
import { Redis } from "@upstash/redis/cloudflare";
import { rateLimit, type RateLimitEnv } from "@floodgate/hono";
import { memoryStore, type RateLimitStore, slidingWindow, upstashStore } from "@floodgate/core";

interface Env {
  UPSTASH_REDIS_REST_URL?: string;
  UPSTASH_REDIS_REST_TOKEN?: string;
}

// Created at global scope: creating a store starts no timer and does no I/O (Workers forbid both
// outside a request). The Upstash client needs the env, so it is made on the first request.
const memory = memoryStore();
let upstash: RateLimitStore | undefined;
const storeFor = (env: Env): RateLimitStore => {
  if (env.UPSTASH_REDIS_REST_URL === undefined || env.UPSTASH_REDIS_REST_TOKEN === undefined) return memory;
  upstash ??= upstashStore({ redis: new Redis({ url: env.UPSTASH_REDIS_REST_URL, token: env.UPSTASH_REDIS_REST_TOKEN }) });
  return upstash;
};

const app = new Hono<{ Bindings: Env } & RateLimitEnv>();
let limiter: ReturnType<typeof rateLimit<{ Bindings: Env }>> | undefined;
app.use("*", (c, next) => {
  limiter ??= rateLimit<{ Bindings: Env }>({
    policy: slidingWindow({ limit: 5, window: "1m" }),
    store: storeFor(c.env),
    trustProxy: "cloudflare", // the client address is CF-Connecting-IP
  });
  return limiter(c, next);
});
app.get("/", (c) => c.json({ hello: "worker", store: c.env.UPSTASH_REDIS_REST_URL === undefined ? "memory" : "upstash" }));

export default app;
