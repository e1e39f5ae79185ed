/**
 * The fixed window's first step on Redis (algorithms/fixed-window.ts): a charge in the current
 * window is TIME and one INCRBY, with no read of the block key; a block flags the state (2^52),
 * so a blocked key still reaches the block; a denial, a new key or another window leaves the
 * stored value as the general path alone would.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRateLimiter, fixedWindow, tokenBucket } from "../../packages/core/src/index.ts";
import { uniquePrefix } from "../stores/store-contract.ts";
import type { Redis as IORedis } from "ioredis";
import { commandsOf, ioredisHarness, type RedisHarness } from "./harness.ts";

const FLAG = 2 ** 52;
let h: RedisHarness;

beforeAll(async () => {
  h = await ioredisHarness();
});
afterAll(async () => {
  await h?.close();
});

const commands = (run: () => Promise<unknown>) => commandsOf(h.admin as IORedis, run);

const stored = async (key: string): Promise<number> => Number(await h.admin.get(key));

describe.each(["server", "local"] as const)("fixed window's first step, %s clock", (clock) => {
  const make = (limit: number, window: "1h" | "2s" = "1h") => {
    const prefix = uniquePrefix();
    const limiter = createRateLimiter({ policy: fixedWindow({ limit, window }), store: h.store(clock, { denyCache: false }), prefix });
    return { limiter, key: (id: string) => `${prefix}{${id}}` };
  };

  it("an admitted charge in a known window is TIME and one INCRBY, with the figures of the general path", async () => {
    const { limiter } = make(10);
    const first = await limiter.limit("k");
    expect(first).toMatchObject({ allowed: true, remaining: 9 });
    expect((await limiter.limit("k", { cost: 2 })).remaining).toBe(7);
    for (const cost of [3, 1]) {
      let d: Awaited<ReturnType<typeof limiter.limit>> | undefined;
      const calls = await commands(async () => {
        d = await limiter.limit("k", { cost });
      });
      expect(d).toMatchObject({ allowed: true, remaining: cost === 3 ? 4 : 3, resetAt: first.resetAt, retryAfterMs: 0 });
      expect(d!.charge).toBeDefined();
      expect(calls).toEqual({ evalsha: 1, incrby: 1, ...(clock === "server" ? { time: 1 } : {}) });
    }
  });

  it("a denial is undone in the same call: the stored value is unchanged, the figures are the general path's", async () => {
    const { limiter, key } = make(3);
    for (let i = 0; i < 3; i++) expect((await limiter.limit("k")).allowed).toBe(true);
    const before = await stored(key("k"));
    const denied = await limiter.limit("k");
    expect(denied).toMatchObject({ allowed: false, remaining: 0 });
    expect(denied.retryAfterMs).toBeGreaterThan(0);
    expect(denied.charge).toBeUndefined();
    const never = await limiter.limit("k", { cost: 4 });
    expect(never.retryAfterMs).toBe(Infinity);
    expect(await stored(key("k"))).toBe(before);
    // The refund path still finds the charges.
    await limiter.reset("k");
    expect((await limiter.limit("k")).remaining).toBe(2);
  });

  it("a new key and a new window take the general path and set the window's expiry", async () => {
    const { limiter, key } = make(5, "2s");
    expect((await limiter.limit("fresh")).remaining).toBe(4);
    const ttl = await h.admin.pttl(key("fresh"));
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(2_000);
    await new Promise((r) => setTimeout(r, ttl + 50));
    expect((await limiter.limit("fresh")).remaining).toBe(4);
    expect(await h.admin.pttl(key("fresh"))).toBeGreaterThan(0);
  });

  it("block() flags the state: denied while blocked, the flag cleared and the count kept after unblock()", async () => {
    const { limiter, key } = make(10);
    await limiter.limit("k");
    await limiter.limit("k");
    await limiter.block("k", "1h");
    expect(await stored(key("k"))).toBeGreaterThanOrEqual(FLAG);
    for (let i = 0; i < 3; i++) {
      const d = await limiter.limit("k");
      expect(d.allowed).toBe(false);
      expect(d.retryAfterMs).toBeGreaterThan(3_500_000);
    }
    expect(await stored(key("k"))).toBeGreaterThanOrEqual(FLAG);
    await limiter.unblock("k");
    expect((await limiter.limit("k")).remaining).toBe(7);
    expect(await stored(key("k"))).toBeLessThan(FLAG);
    const calls = await commands(() => limiter.limit("k"));
    expect(calls["get"]).toBeUndefined();
  });

  it("a block that runs out: the next charge clears the flag and counts on from the charges made before it", async () => {
    const { limiter, key } = make(10);
    await limiter.limit("k", { cost: 4 });
    await limiter.block("k", 300);
    expect((await limiter.limit("k")).allowed).toBe(false);
    await new Promise((r) => setTimeout(r, 350));
    expect((await limiter.limit("k")).remaining).toBe(5);
    expect(await stored(key("k"))).toBeLessThan(FLAG);
    expect((await limiter.limit("k")).remaining).toBe(4);
  });

  it("refunds and penalties keep a block's flag", async () => {
    const { limiter, key } = make(10);
    const charged = await limiter.limit("k", { cost: 5 });
    await limiter.block("k", "1h");
    await limiter.refund("k", { charge: charged.charge!, cost: 2 });
    expect(await stored(key("k"))).toBeGreaterThanOrEqual(FLAG);
    await limiter.penalty("k", { cost: 1 });
    expect(await stored(key("k"))).toBeGreaterThanOrEqual(FLAG);
    expect((await limiter.limit("k")).allowed).toBe(false);
    await limiter.unblock("k");
    expect((await limiter.limit("k")).remaining).toBe(5);
  });

  it("state of another kind under the same key is replaced, as by the general path", async () => {
    const prefix = uniquePrefix();
    const store = h.store(clock, { denyCache: false });
    const bucket = createRateLimiter({ policy: tokenBucket({ capacity: 5, refillRate: 1 }), store, prefix });
    await bucket.limit("k");
    await h.admin.rpush(`${prefix}{list}`, "x");
    const windowed = createRateLimiter({ policy: fixedWindow({ limit: 10, window: "1h" }), store, prefix });
    expect((await windowed.limit("k")).remaining).toBe(9);
    expect((await windowed.limit("k")).remaining).toBe(8);
    expect((await windowed.limit("list")).remaining).toBe(9);
  });
});

describe("a flagged state read by a policy set of several policies", () => {
  it("is counted without its flag once the block is over", async () => {
    const prefix = uniquePrefix();
    const store = h.store("server", { denyCache: false });
    const single = createRateLimiter({ policy: fixedWindow({ limit: 10, window: "1h", name: "w" }), store, prefix });
    await single.limit("k", { cost: 3 });
    await single.block("k", 200);
    await new Promise((r) => setTimeout(r, 250));
    const several = createRateLimiter({
      policy: [fixedWindow({ limit: 10, window: "1h", name: "w" }), tokenBucket({ capacity: 100, refillRate: 1, name: "b" })],
      store,
      prefix,
    });
    const d = await several.limit("k");
    expect(d.allowed).toBe(true);
    expect(d.policies[0]!.remaining).toBe(6);
  });
});
