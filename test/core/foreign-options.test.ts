// Options of the other rate limiters, given to Floodgate's: each fails at construction with its
// library and Floodgate's equivalent, in the words of the migration guides.
import { describe, expect, it } from "vitest";
import { createRateLimiter, fixedWindow, FloodgateError, withRateLimit } from "../../packages/core/src/index.ts";

const policy = fixedWindow({ limit: 5, window: "1m" });
const messageOf = (fn: () => unknown): string => {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(FloodgateError);
    expect((error as FloodgateError).code).toBe("INVALID_OPTION");
    return (error as Error).message;
  }
  throw new Error("expected a FloodgateError");
};
const engine = (options: Record<string, unknown>) => messageOf(() => createRateLimiter({ policy, ...options } as never));
const http = (options: Record<string, unknown>) => messageOf(() => withRateLimit(() => new Response(), { policy, ...options } as never));

describe("foreign options", () => {
  it("rate-limiter-flexible's and @upstash/ratelimit's options to createRateLimiter()", () => {
    expect(engine({ points: 5 })).toBe(
      "createRateLimiter(): unknown option `points` (rate-limiter-flexible); use `policy: fixedWindow({ limit: points, window: duration * 1000 })`.",
    );
    expect(engine({ duration: 60 })).toContain("(koa-ratelimit, rate-limiter-flexible); use the policy's `window`");
    expect(engine({ keyPrefix: "rlflx" })).toContain("(rate-limiter-flexible); use `prefix`");
    expect(engine({ storeClient: {} })).toContain("(rate-limiter-flexible); use `store: redisStore({ client })`");
    expect(engine({ blockDuration: 60 })).toContain("(rate-limiter-flexible); use a second, longer policy");
    expect(engine({ limiter: {} })).toContain("(@upstash/ratelimit); use `policy: slidingWindow({ limit, window })`");
    expect(engine({ redis: {} })).toContain("(@upstash/ratelimit); use `store: upstashStore({ redis })`");
    expect(engine({ ephemeralCache: new Map() })).toContain("(@upstash/ratelimit); the Redis stores' `denyCache`");
    expect(engine({ timeout: 1000 })).toContain("(@upstash/ratelimit); use `timeoutMs`");
  });

  it("express-rate-limit's, hono-rate-limiter's and koa-ratelimit's options to the middlewares and withRateLimit()", () => {
    expect(http({ windowMs: 60_000 })).toBe(
      'rateLimit(): unknown option `windowMs` (express-rate-limit, hono-rate-limiter); use `policy: fixedWindow({ limit, window })` (`window` in ms or as "1m"; or slidingWindow, slidingLog, tokenBucket).',
    );
    expect(http({ standardHeaders: "draft-7" })).toContain('use `headers: "draft-6"`, `"draft-7"` or `"draft-11"`');
    expect(http({ requestPropertyName: "limit" })).toContain(
      'no equivalent: the decision is always `req.rateLimit` (Express), `c.get("rateLimit")` (Hono)',
    );
    expect(http({ passOnStoreError: true })).toContain('use `onStoreError: "allow"`');
    expect(http({ driver: "redis" })).toContain("(koa-ratelimit); use `store: redisStore({ client })`");
    expect(http({ whitelist: () => false })).toContain("(koa-ratelimit); use `allowList`");
    expect(http({ disableHeader: true })).toContain("(koa-ratelimit); use `headers: false`");
    expect(http({ errorMessage: "slow" })).toContain("(koa-ratelimit); use `message`");
    expect(http({ namespace: "limit" })).toContain("(koa-ratelimit); use `prefix`");
    expect(http({ status: 429 })).toContain("(koa-ratelimit); use `statusCode`");
    expect(http({ headers: { remaining: "Rate-Limit-Remaining" } })).toContain(
      "invalid option `headers`: received an object; expected true, false, or one or several of",
    );
  });

  it("a typo that is no other library's option keeps the closest guess", () => {
    expect(http({ timeoutMS: 5 })).toContain("unknown option `timeoutMS` (did you mean `timeoutMs`?)");
  });
});
