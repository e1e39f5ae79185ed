import { createRateLimiter, fixedWindow, slidingLog, slidingWindow, tokenBucket } from "./packages/core/src/index.ts";
import { redisStore } from "./packages/core/src/redis.ts";
import { startRedis } from "./test/support/redis-server.ts";
import Redis from "ioredis";
const srv = await startRedis();
console.log(Object.keys(srv));
