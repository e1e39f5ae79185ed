import { fixedWindow, upstashStore, withRateLimit } from "@floodgate/core";
import type { Redis } from "@upstash/redis";

type Handler = (request: Request) => Response | Promise<Response>;

/** 10 requests per 10 seconds and client IP (Vercel sets X-Real-IP) in front of `app`. */
export function limited(app: Handler, redis: Redis): Handler {
  return withRateLimit(app, {
    policy: fixedWindow({ limit: 10, window: "10s" }),
    store: upstashStore({ redis }),
    trustProxy: "vercel", // the key: X-Real-IP, IPv6 grouped by /64
    headers: "legacy", // X-RateLimit-Reset in epoch seconds, and Retry-After on a 429
    handler: () => ({ body: "Too many requests" }),
  });
}
