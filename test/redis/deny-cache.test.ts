import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { createRateLimiter, fixedWindow, redisStore, tokenBucket } from "../../packages/core/src/index.ts";
import { DenyCache } from "../../packages/core/src/stores/deny-cache/denials.ts";
import { sourceOf } from "../../packages/core/src/stores/store.ts";
import { clearOfHourBoundary, uniquePrefix } from "../stores/store-contract.ts";
import { ioredisHarness } from "./harness.ts";

// One policy, limit 5: [allowed, p.allowed, remaining, resetAt, retryAfterMs]
const denied = (retry: number): number[] => [0, 0, 0, 5000, retry];

describe("DenyCache", () => {
  it("answers the denied cost until retryAfter - 1 ms after sending, counting the wait down", () => {
    const cache = new DenyCache(10);
    cache.remember("k", 1, 2, 1000, denied(300), [5]);
    expect(cache.check("k", 1, 1, 1100)).toBeUndefined(); // smaller cost: ask the store
    expect(cache.check("k", 1, 3, 1100)).toBeUndefined(); // larger cost: its exact wait is longer, ask the store
    expect(cache.check("k", 1, 2, 1100)).toEqual([0, 0, 0, 5000, 200]);
    // Marked as the cache's answer (for Decision.source), not as the store's; still a plain list of numbers.
    const hit = cache.check("k", 1, 2, 1100)!;
    expect(sourceOf(hit)).toBe("cache");
    expect(Object.keys(hit)).toEqual(["0", "1", "2", "3", "4"]);
    expect(sourceOf(denied(300))).toBe("store");
    expect(cache.check("k", 1, 2, 1298.5)).toEqual([0, 0, 0, 5000, 2]);
    expect(cache.check("k", 2, 2, 1100)).toBeUndefined(); // another policy set
    expect(cache.check("k", 1, 2, 1299)).toBeUndefined(); // no longer certain
    expect(cache.size).toBe(0); // and dropped
  });

  it("a cost above a policy's limit is denied forever, and marked so", () => {
    const cache = new DenyCache(10);
    cache.remember("k", 1, 2, 0, denied(300), [5]);
    expect(cache.check("k", 1, 6, 10)).toEqual([0, 0, 0, 5000, -1]);
    cache.remember("n", 1, 9, 0, denied(-1), [5]);
    expect(cache.check("n", 1, 9, 1e12)).toEqual([0, 0, 0, 5000, -1]);
  });

  it("drops an entry when the clock steps back before the denial", () => {
    const cache = new DenyCache(10);
    cache.remember("k", 1, 1, 1000, denied(300), [5]);
    expect(cache.check("k", 1, 1, 999)).toBeUndefined();
    expect(cache.size).toBe(0);
  });

  it("does not cache a wait of 1 ms or less (nothing is certain) and is bounded, oldest out first", () => {
    const cache = new DenyCache(3);
    cache.remember("one", 1, 1, 0, denied(1), [5]);
    expect(cache.size).toBe(0);
    for (const k of ["a", "b", "c", "d"]) cache.remember(k, 1, 1, 0, denied(100), [5]);
    expect(cache.size).toBe(3);
    expect(cache.check("a", 1, 1, 1)).toBeUndefined();
    expect(cache.check("d", 1, 1, 1)).toBeDefined();
    cache.forget("d");
    expect(cache.check("d", 1, 1, 1)).toBeUndefined();
    cache.clear();
    expect(cache.size).toBe(0);
  });

  it("with several policies, waits for the longest denying one; admitted policies stay as reported", () => {
    const cache = new DenyCache(10);
    const result = [0, 1, 4, 100, 0, 0, 0, 900, 800, 0, 0, 500, 50];
    cache.remember("k", 1, 1, 0, result, [5, 5, 5]);
    expect(cache.check("k", 1, 1, 700)).toEqual([0, 1, 4, 100, 0, 0, 0, 900, 100, 0, 0, 500, 1]);
    expect(cache.check("k", 1, 1, 799)).toBeUndefined();
  });

  it("with several policies, a larger cost than the denied one asks the store (another policy may bind it, with another wait)", () => {
    const cache = new DenyCache(10);
    // Policy 0 denied a cost of 1 for 1000 ms; policy 1 admitted it with 1 unit left.
    const result = [0, 0, 0, 2000, 1000, 1, 1, 3600000, 0];
    cache.remember("k", 1, 1, 0, result, [2, 3]);
    expect(cache.check("k", 1, 1, 100)).toEqual([0, 0, 0, 2000, 900, 1, 1, 3600000, 0]);
    expect(cache.check("k", 1, 2, 100)).toBeUndefined();
    // Above a policy's limit: certain, never admitted, and that policy binds.
    expect(cache.check("k", 1, 3, 100)).toEqual([0, 0, 0, 2000, -1, 1, 1, 3600000, 0]);
    expect(cache.check("k", 1, 4, 100)).toEqual([0, 0, 0, 2000, -1, 0, 1, 3600000, -1]);
  });
});

describe("deny cache on a real Redis: a larger cost than the cached denial", () => {
  let h: Awaited<ReturnType<typeof ioredisHarness>>;
  beforeAll(async () => {
    h = await ioredisHarness();
  });
  afterAll(async () => {
    await h?.close();
  });

  it("gets the store's exact wait, not the smaller cost's counted down (one token bucket)", async () => {
    // Local clock, fixed time: the exact waits are known. Capacity 3, one token per second.
    const now = 1_700_000_000_000;
    const policy = tokenBucket({ capacity: 3, refillRate: 1 });
    const prefix = uniquePrefix();
    const cached = createRateLimiter({ policy, store: h.store("local"), prefix, clock: () => now });
    const uncached = createRateLimiter({ policy, store: h.store("local", { denyCache: false }), prefix, clock: () => now });
    expect((await cached.limit("k", { cost: 3 })).allowed).toBe(true);
    expect(await cached.limit("k")).toMatchObject({ allowed: false, retryAfterMs: 1000 });
    const larger = await cached.limit("k", { cost: 2 });
    expect(larger).toMatchObject({ allowed: false, retryAfterMs: 2000 });
    expect(larger.retryAfterMs).toBe((await uncached.limit("k", { cost: 2 })).retryAfterMs);
  });
});

describe("deny cache on a real Redis: this process's refund or reset while a denial is in flight", () => {
  let h: Awaited<ReturnType<typeof ioredisHarness>>;
  beforeAll(async () => {
    h = await ioredisHarness();
  });
  // Fixed windows of an hour on the server's clock: a boundary mid-test would admit again.
  beforeEach(() => clearOfHourBoundary());
  afterAll(async () => {
    await h?.close();
  });

  it.each(["refund", "reset"] as const)(
    "%s sent after the denied consume: the denial is not remembered (the store admits again)",
    async (op) => {
      const limiter = createRateLimiter({
        policy: fixedWindow({ limit: 1, window: "1h" }),
        store: h.store("server"),
        prefix: uniquePrefix(),
      });
      expect((await limiter.limit("k")).allowed).toBe(true);
      // One connection, so Redis runs them in this order: the consume is denied, then the
      // refund/reset gives the unit back. The denial's reply arrives after the refund was sent.
      const denied = limiter.limit("k");
      const undo = op === "refund" ? limiter.refund("k") : limiter.reset("k");
      expect((await denied).allowed).toBe(false);
      await undo;
      expect((await limiter.peek("k")).remaining).toBe(1);
      expect((await limiter.limit("k")).allowed).toBe(true);
    },
  );

  it.each(["refund", "reset"] as const)(
    "%s sent before a consume but run after it (another connection, an HTTP request): the denial is not kept",
    async (op) => {
      // Upstash's HTTP requests, a pool or a cluster do not keep this process's order: the undo
      // (refund/reset, sent first) reaches Redis after the consume it raced with.
      let release!: () => void;
      const held = new Promise<void>((resolve) => (release = resolve));
      const slow = (delay: boolean) => (delay ? held : Promise.resolve());
      const client = {
        evalsha: async (sha: string, n: number, ...rest: string[]) => {
          await slow(rest[n] === "-1");
          return h.client.evalsha(sha, n, ...rest);
        },
        eval: async (source: string, n: number, ...rest: string[]) => {
          await slow(rest[n] === "-1");
          return h.client.eval(source, n, ...rest);
        },
        del: async (...keys: string[]) => {
          await slow(true);
          return h.client.del(...keys);
        },
      };
      const limiter = createRateLimiter({
        policy: fixedWindow({ limit: 1, window: "1h" }),
        store: redisStore({ client }),
        prefix: uniquePrefix(),
      });
      expect((await limiter.limit("k")).allowed).toBe(true);
      const undo = op === "refund" ? limiter.refund("k") : limiter.reset("k");
      expect((await limiter.limit("k")).allowed).toBe(false); // Redis has not run the undo yet
      release();
      await undo;
      expect((await limiter.peek("k")).remaining).toBe(1);
      expect((await limiter.limit("k")).allowed).toBe(true); // the store admits: so must the limiter
    },
  );

  it.each(["refund", "reset"] as const)(
    "%s done while the denied consume's reply is on its way: the denial is not remembered",
    async (op) => {
      // Redis runs the consume (denied), then the undo, whose reply arrives first: the store notes
      // the denial into the cache itself, and must see that a forget came after the call was sent.
      let holdNext = false;
      let release!: () => void;
      const held = new Promise<void>((resolve) => (release = resolve));
      const client = {
        evalsha: async (sha: string, n: number, ...rest: string[]) => {
          const hold = holdNext;
          holdNext = false;
          const reply = await h.client.evalsha(sha, n, ...rest);
          if (hold) await held;
          return reply;
        },
        eval: (source: string, n: number, ...rest: string[]) => h.client.eval(source, n, ...rest),
        del: (...keys: string[]) => h.client.del(...keys),
      };
      const store = redisStore({ client });
      const limiter = createRateLimiter({ policy: fixedWindow({ limit: 1, window: "1h" }), store, prefix: uniquePrefix() });
      expect((await limiter.limit("k")).allowed).toBe(true);
      holdNext = true;
      const denied = limiter.limit("k");
      await (op === "refund" ? limiter.refund("k") : limiter.reset("k"));
      release();
      expect((await denied).allowed).toBe(false);
      expect(store.deniedKeys).toBe(0);
      expect((await limiter.limit("k")).allowed).toBe(true); // the store admits: so must the limiter
    },
  );
});
