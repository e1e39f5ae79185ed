import type { Express } from "express";
import { rateLimit } from "express-rate-limit";
import type { Redis } from "ioredis";
import { type RedisReply, RedisStore } from "rate-limit-redis";

/** 5 requests per minute and client IP on /api/, counted in Redis. */
export function limitApi(app: Express, redis: Redis): void {
  app.set("trust proxy", 1); // one reverse proxy in front: req.ip is the client it saw
  app.use(
    "/api/",
    rateLimit({
      windowMs: 60_000,
      limit: 5,
      standardHeaders: "draft-8",
      legacyHeaders: true,
      message: { error: "Too many requests, slow down." },
      store: new RedisStore({
        prefix: "rl:",
        sendCommand: (command: string, ...args: string[]) => redis.call(command, ...args) as Promise<RedisReply>,
      }),
    }),
  );
}
