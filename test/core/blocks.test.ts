// The `block` option, penalties and manual blocks at the limiter: validation, and what a store
// without the operations gets. The behaviour on every store is in the store contract.
import { describe, expect, it } from "vitest";
import {
  createRateLimiter,
  fixedWindow,
  FloodgateError,
  memoryStore,
  type RateLimitStore,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from "../../packages/core/src/index.ts";

describe("the block option", () => {
  it("every policy factory takes it, as a duration; without it blockMs is 0", () => {
    expect(fixedWindow({ limit: 5, window: "15m", block: "1h" }).blockMs).toBe(3_600_000);
    expect(slidingWindow({ limit: 5, window: "15m", block: 90_000 }).blockMs).toBe(90_000);
    expect(slidingLog({ limit: 5, window: "15m", block: "2d" }).blockMs).toBe(172_800_000);
    expect(tokenBucket({ capacity: 5, refillRate: 1, block: "30s" }).blockMs).toBe(30_000);
    expect(fixedWindow({ limit: 5, window: "15m" }).blockMs).toBe(0);
  });

  it.each([0, -1, 1.5, "1 year", "11000d", null])("rejects block %j with INVALID_OPTION naming it", (block) => {
    expect(() => fixedWindow({ limit: 5, window: "1m", block: block as never })).toThrow(
      expect.objectContaining({ code: "INVALID_OPTION", message: expect.stringMatching(/`block`.*at most 10 years/) }),
    );
  });

  it("a store without the block operation is refused at construction when a policy blocks", () => {
    const bare = memoryStore();
    const old: RateLimitStore = {
      name: "old",
      consume: (s, k, c, n) => bare.consume(s, k, c, n),
      peek: (s, k, n) => bare.peek(s, k, n),
      refund: (s, k, c, n, m) => bare.refund(s, k, c, n, m),
      reset: (s, k) => bare.reset(s, k),
    };
    expect(() => createRateLimiter({ policy: fixedWindow({ limit: 1, window: "1m", block: "1h" }), store: old })).toThrow(
      /policy "1-per-1m" has a `block`, but the old store has no `block` operation/,
    );
    const limiter = createRateLimiter({ policy: fixedWindow({ limit: 1, window: "1m" }), store: old });
    return Promise.all([
      expect(limiter.penalty("k")).rejects.toThrow(/The old store has no `penalty` operation/),
      expect(limiter.block("k", "1m")).rejects.toThrow(/no `block` operation/),
      expect(limiter.unblock("k")).rejects.toThrow(/no `unblock` operation/),
    ]);
  });
});

describe("penalty and block arguments", () => {
  const limiter = createRateLimiter({ policy: fixedWindow({ limit: 3, window: "1m" }) });

  it.each([0, -1, 1.5, "2", Infinity])("penalty cost %j is an INVALID_ARGUMENT", async (cost) => {
    await expect(limiter.penalty("k", { cost: cost as never })).rejects.toThrow(FloodgateError);
    await expect(limiter.penalty("k", { cost: cost as never })).rejects.toMatchObject({ code: "INVALID_ARGUMENT" });
    expect((await limiter.peek("k")).remaining).toBe(3);
  });

  it.each([0, "soon", -5, 400_000_000_000])("block duration %j is an INVALID_ARGUMENT", async (duration) => {
    const key = `b${String(duration)}`;
    await expect(limiter.block(key, duration as never)).rejects.toMatchObject({
      code: "INVALID_ARGUMENT",
      message: expect.stringMatching(/^Invalid block duration: received .+; expected a whole number of milliseconds/),
    });
    expect((await limiter.limit(key)).allowed).toBe(true);
  });

  it("an empty key is rejected as for limit()", async () => {
    await expect(limiter.penalty("")).rejects.toMatchObject({ code: "INVALID_ARGUMENT" });
    await expect(limiter.block("", "1m")).rejects.toMatchObject({ code: "INVALID_ARGUMENT" });
    await expect(limiter.unblock("")).rejects.toMatchObject({ code: "INVALID_ARGUMENT" });
  });
});
