import type { Express, NextFunction, Request, Response } from "express";
import type { Redis } from "ioredis";
import { RateLimiterRedis, RateLimiterRes } from "rate-limiter-flexible";

/** 5 requests per minute and client IP on /api/, counted in Redis. */
export function limitApi(app: Express, redis: Redis): void {
  const limiter = new RateLimiterRedis({ storeClient: redis, keyPrefix: "rlflx", points: 5, duration: 60 });
  app.use("/api/", (req: Request, res: Response, next: NextFunction) => {
    limiter.consume(req.ip ?? "unknown").then(
      (result) => {
        res.set("X-RateLimit-Limit", "5");
        res.set("X-RateLimit-Remaining", `${result.remainingPoints}`);
        next();
      },
      (rejection: unknown) => {
        if (!(rejection instanceof RateLimiterRes)) return next(rejection); // Redis failed
        res.set("Retry-After", `${Math.ceil(rejection.msBeforeNext / 1000)}`);
        res.status(429).json({ error: "Too many requests, slow down." });
      },
    );
  });
}
