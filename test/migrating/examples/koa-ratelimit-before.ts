import type { Redis } from "ioredis";
import type Koa from "koa";
import ratelimit from "koa-ratelimit";

/** 5 requests per minute and client IP, counted in Redis (a sliding log). */
export function limitApi(app: Koa, redis: Redis): void {
  app.proxy = true;
  app.maxIpsCount = 1; // one reverse proxy in front: ctx.ip is the client it saw
  app.use(
    ratelimit({
      driver: "redis",
      db: redis,
      duration: 60_000,
      max: 5,
      id: (ctx) => ctx.ip,
      errorMessage: "Too many requests, slow down.",
    }),
  );
}
