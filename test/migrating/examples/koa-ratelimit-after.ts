import { redisStore, slidingLog } from "@floodgate/core";
import { rateLimit } from "@floodgate/koa";
import type { Redis } from "ioredis";
import type Koa from "koa";

/** 5 requests per minute and client IP, counted in Redis (a sliding log). */
export function limitApi(app: Koa, redis: Redis): void {
  app.proxy = true;
  app.maxIpsCount = 1; // Floodgate follows Koa's proxy settings, through ctx.ip
  app.use(
    rateLimit({
      policy: slidingLog({ limit: 5, window: "1m" }),
      store: redisStore({ client: redis }),
      prefix: "limit:",
      headers: "legacy",
      handler: () => ({ body: "Too many requests, slow down." }), // a plain-text 429, as before
    }),
  );
}
