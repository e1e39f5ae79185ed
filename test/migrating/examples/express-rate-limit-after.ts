import { fixedWindow, redisStore } from "@floodgate/core";
import { rateLimit } from "@floodgate/express";
import type { Express } from "express";
import type { Redis } from "ioredis";

/** 5 requests per minute and client IP on /api/, counted in Redis. */
export function limitApi(app: Express, redis: Redis): void {
  app.set("trust proxy", 1); // Floodgate reads req.ip, so Express's setting still decides
  app.use(
    "/api/",
    rateLimit({
      policy: fixedWindow({ limit: 5, window: "1m", name: "api" }),
      store: redisStore({ client: redis }),
      prefix: "rl:",
      headers: ["legacy", "draft-11"],
      ipv6Subnet: 56, // express-rate-limit's grouping; Floodgate's default is 64
      message: { error: "Too many requests, slow down." },
    }),
  );
}
