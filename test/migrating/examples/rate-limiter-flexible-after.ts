import { fixedWindow, redisStore } from "@floodgate/core";
import { rateLimit } from "@floodgate/express";
import type { Express } from "express";
import type { Redis } from "ioredis";

/** 5 requests per minute and client IP on /api/, counted in Redis. */
export function limitApi(app: Express, redis: Redis): void {
  app.use(
    "/api/",
    rateLimit({
      policy: fixedWindow({ limit: 5, window: "1m" }),
      store: redisStore({ client: redis }),
      prefix: "rlflx:",
      headers: "legacy", // plus Retry-After on every 429
      message: { error: "Too many requests, slow down." },
    }),
  );
}
