/**
 * Compound limiters, behaviour by behaviour, on every path: one memory store (the store step),
 * a memory store per dimension (one by one), and one Redis server (one script call).
 */
import { Redis as IORedis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  concurrency,
  createCompoundLimiter,
  createRateLimiter,
  fixedWindow,
  FloodgateError,
  memoryStore,
  type Policy,
  type RateLimitStore,
  redisStore,
  slidingWindow,
  tokenBucket,
} from "../../packages/core/src/index.ts";
import { uniquePrefix } from "../stores/store-contract.ts";
import { type RedisInstance, startRedis } from "../support/redis-server.ts";

const T0 = 1_767_225_600_000; // 2026-01-01T00:00:00Z

let redis: RedisInstance;
let client: IORedis;
beforeAll(async () => {
  redis = await startRedis();
  client = new IORedis(redis.port, redis.host);
});
afterAll(async () => {
  client?.disconnect();
  await redis?.stop();
});

/** How each setting makes a dimension's store. */
const settings: [string, () => () => RateLimitStore, "store" | "ordered"][] = [
  ["one memory store", () => {
    const store = memoryStore();
    return () => store;
  }, "store"],
  ["a memory store per dimension", () => () => memoryStore(), "ordered"],
  ["one Redis server", () => {
    const store = redisStore({ client, clock: "local" });
    return () => store;
  }, "store"],
];

describe.each(settings)("compound limits on %s", (_, stores, path) => {
  let now = T0;
  const make = (dims: Record<string, Policy | Policy[]>) => {
    const storeOf = stores();
    const prefix = uniquePrefix();
    return createCompoundLimiter({
      dimensions: Object.fromEntries(
        Object.entries(dims).map((
          [name, policy],
        ) => [name, createRateLimiter({ policy, store: storeOf(), prefix: `${prefix}${name}:`, clock: () => now })]),
      ),
    });
  };
  const keys = { user: "u1", org: "acme", ip: "10.0.0.1", global: "all" };
  const four = () =>
    make({
      user: slidingWindow({ limit: 5, window: "1m" }),
      org: fixedWindow({ limit: 8, window: "1d" }),
      ip: tokenBucket({ capacity: 3, refillRate: 1 }),
      global: [fixedWindow({ limit: 100, window: "1s" }), fixedWindow({ limit: 1000, window: "1h", name: "hourly" })],
    });

  it("admits while every dimension admits, charging all; names the binding dimension with its figures", async () => {
    now = T0;
    const q = four();
    expect(q.path).toBe(path);
    const first = await q.limit(keys);
    expect(first.allowed).toBe(true);
    expect(first.dimension).toBe("ip"); // 2 of 3 left: the fewest
    expect(first.remaining).toBe(2);
    expect(first.limit).toBe(3);
    expect(Object.keys(first.dimensions)).toEqual(["user", "org", "ip", "global"]);
    expect(first.dimensions["org"]).toMatchObject({ dimension: "org", key: "acme", allowed: true, remaining: 7, limit: 8 });
    expect(first.dimensions["global"]!.policies.map((p) => p.remaining)).toEqual([99, 999]);
    expect(first.charge).toMatchObject({ cost: 1, keys });
    await q.limit(keys);
    await q.limit(keys);
    // The IP bucket is empty: refused, naming it, with its wait; nothing charged anywhere.
    const denied = await q.limit(keys);
    expect(denied.allowed).toBe(false);
    expect(denied.dimension).toBe("ip");
    expect(denied.retryAfterMs).toBe(1000);
    expect(denied.charge).toBeUndefined();
    const after = await q.peek(keys);
    expect(after.dimensions["user"]!.remaining).toBe(2);
    expect(after.dimensions["org"]!.remaining).toBe(5);
    expect(after.dimensions["global"]!.policies.map((p) => p.remaining)).toEqual([97, 997]);
  });

  it("a denial in one dimension charges no other, with any cost", async () => {
    now = T0 + 86_400_000;
    const q = four();
    const big = await q.limit(keys, { cost: 4 }); // the IP bucket holds 3
    expect(big.allowed).toBe(false);
    expect(big.dimension).toBe("ip");
    expect(big.retryAfterMs).toBe(Infinity);
    const peek = await q.peek(keys);
    expect(Object.values(peek.dimensions).map((d) => d.remaining)).toEqual([5, 8, 3, 100]);
  });

  it("a refund gives back into every dimension's charge, also after a JSON round trip", async () => {
    now = T0 + 2 * 86_400_000;
    const q = four();
    const d = await q.limit(keys, { cost: 2 });
    await q.limit(keys);
    await q.refund(JSON.parse(JSON.stringify(d.charge)));
    const peek = await q.peek(keys);
    // The bucket was granted to since the charge: it gives nothing back (docs/refunds.md).
    expect(Object.values(peek.dimensions).map((x) => x.remaining)).toEqual([4, 7, 0, 99]);
    await expect(q.refund({ cost: 1 } as never)).rejects.toThrow(/Invalid compound charge/);
  });

  it("reservations across dimensions: concurrency units held in every dimension, released by settle", async () => {
    now = T0 + 3 * 86_400_000;
    const q = make({
      user: concurrency({ limit: 1, timeout: "1m" }),
      org: [concurrency({ limit: 2, timeout: "1m" }), fixedWindow({ limit: 10, window: "1h" })],
    });
    await expect(q.limit({ user: "a", org: "o" })).rejects.toThrow(/concurrency policy/);
    const a = await q.reserve({ user: "a", org: "o" }, { estimate: 3 });
    expect(a.decision.allowed).toBe(true);
    const b = await q.reserve({ user: "b", org: "o" });
    expect(b.decision.allowed).toBe(true);
    // The organisation holds two: a third user is refused by it, and its own unit is released.
    const c = await q.reserve({ user: "c", org: "o" });
    expect(c.decision.allowed).toBe(false);
    expect(c.decision.dimension).toBe("org");
    expect((await q.peek({ user: "c", org: "o" })).dimensions["user"]!.remaining).toBe(1);
    expect(await a.settle(1)).toBe(true);
    expect(await a.settle(1)).toBe(false);
    expect(await q.settle({ user: "b", org: "o" }, { ids: b.ids, actual: 0 })).toBe(true);
    const peek = await q.peek({ user: "a", org: "o" });
    expect(peek.dimensions["org"]!.policies.map((p) => p.remaining)).toEqual([2, 9]); // a's 1 unit, b's cancelled
  });

  it("refuses bad arguments clearly", async () => {
    const q = four();
    await expect(q.limit({ user: "u" } as never)).rejects.toThrow(/no key for dimension `org`/);
    await expect(q.limit({ ...keys, team: "x" } as never)).rejects.toThrow(/`team` is no dimension/);
    await expect(q.limit(keys, { cost: 0 })).rejects.toThrow(FloodgateError);
    expect(() => createCompoundLimiter({ dimensions: {} })).toThrow(/expected 1 to 16/);
    expect(() => createCompoundLimiter({ dimensions: { a: {} as never } })).toThrow(/made by createRateLimiter/);
    expect(() =>
      createCompoundLimiter({ dimensions: { a: createRateLimiter({ policy: fixedWindow({ limit: 1, window: "1s" }) }) }, x: 1 } as never)
    ).toThrow(
      /unknown option `x`/,
    );
    const store = memoryStore();
    const same = createCompoundLimiter({
      dimensions: {
        a: createRateLimiter({ policy: fixedWindow({ limit: 1, window: "1s" }), store }),
        b: createRateLimiter({ policy: fixedWindow({ limit: 2, window: "1s" }), store }),
      },
    });
    await expect(same.limit({ a: "k", b: "k" })).rejects.toThrow(/same key "k" under the same prefix/);
  });
});

describe("blocks in a compound step", () => {
  it("a dimension whose policy blocks is blocked by its refusal, the others stay untouched (memory and Redis)", async () => {
    for (const store of [memoryStore(), redisStore({ client, clock: "local" })]) {
      let now = T0;
      const prefix = uniquePrefix();
      const q = createCompoundLimiter({
        dimensions: {
          login: createRateLimiter({
            policy: fixedWindow({ limit: 2, window: "1m", block: "10m" }),
            store,
            prefix: `${prefix}l:`,
            clock: () => now,
          }),
          ip: createRateLimiter({ policy: fixedWindow({ limit: 100, window: "1m" }), store, prefix: `${prefix}i:`, clock: () => now }),
        },
      });
      const k = { login: "alice", ip: "1.2.3.4" };
      await q.limit(k);
      await q.limit(k);
      const third = await q.limit(k);
      expect(third.allowed).toBe(false);
      expect(third.dimension).toBe("login");
      expect(third.retryAfterMs).toBe(600_000);
      now += 120_000; // the window passed, the block has not
      const fourth = await q.limit(k);
      expect(fourth.allowed).toBe(false);
      expect(fourth.retryAfterMs).toBe(480_000);
      // The IP's window passed too: its two admissions are gone, the refusals charged it nothing.
      expect((await q.dimensions.ip.peek("1.2.3.4")).remaining).toBe(100);
    }
  });
});

describe("dimensions with shadow policies", () => {
  it("are decided through their own limiter (one by one), their shadow figures reported", async () => {
    const store = memoryStore();
    const q = createCompoundLimiter({
      dimensions: {
        user: createRateLimiter({
          policy: fixedWindow({ limit: 5, window: "1m" }),
          shadowPolicy: fixedWindow({ limit: 1, window: "1m", name: "tighter" }),
          store,
          prefix: "su:",
        }),
        org: createRateLimiter({ policy: fixedWindow({ limit: 2, window: "1m" }), store, prefix: "so:" }),
      },
    });
    expect(q.path).toBe("ordered");
    const first = await q.limit({ user: "u", org: "o" });
    expect(first.allowed).toBe(true);
    expect(first.shadow.map((p) => p.policy)).toEqual(["tighter"]);
    await q.limit({ user: "u", org: "o" });
    const third = await q.limit({ user: "u", org: "o" });
    expect(third.allowed).toBe(false);
    expect(third.dimension).toBe("org");
    expect((await q.dimensions.user.peek("u")).remaining).toBe(3); // the refusal gave the user's unit back
  });
});
