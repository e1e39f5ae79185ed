/**
 * The token bucket's and the sliding window counter's first step on Redis
 * (algorithms/token-bucket.ts, sliding-window.ts, block-flag.ts): a charge is TIME, one GET and,
 * when admitted, one SET, with no read of the block key; a block flags the state (2^52) and keeps
 * it alive until the block ends, so a blocked key still reaches the block, even a key whose state
 * would have expired long before; a denial writes nothing.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRateLimiter, fixedWindow, slidingWindow, tokenBucket } from "../../packages/core/src/index.ts";
import type { Policy } from "../../packages/core/src/index.ts";
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

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Per kind: a policy of `limit` refilled or counted over `window`, and whether its stored state carries the flag. */
const KINDS = {
  "token bucket": {
    policy: (limit: number, windowMs: number): Policy => tokenBucket({ capacity: limit, refillRate: (limit * 1000) / windowMs }),
    flagged: (raw: string | null) => raw !== null && Number(raw) <= -FLAG,
  },
  "sliding window": {
    policy: (limit: number, windowMs: number): Policy => slidingWindow({ limit, window: windowMs }),
    flagged: (raw: string | null) => raw !== null && Number(raw.split(":")[1]) >= FLAG,
  },
} as const;

describe.each(Object.keys(KINDS) as (keyof typeof KINDS)[])("%s: first step", (kind) => {
  const { policy, flagged } = KINDS[kind];
  describe.each(["server", "local"] as const)("%s clock", (clock) => {
    const make = (limit: number, windowMs = 3_600_000) => {
      const prefix = uniquePrefix();
      const limiter = createRateLimiter({ policy: policy(limit, windowMs), store: h.store(clock, { denyCache: false }), prefix });
      return { limiter, key: (id: string) => `${prefix}{${id}}` };
    };
    const time = clock === "server" ? { time: 1 } : {};

    it("a charge is one GET and one SET, with the general path's figures; a denial writes nothing", async () => {
      const { limiter, key } = make(3);
      await limiter.peek("warm-up"); // loads the scripts: every call after it is an EVALSHA
      await limiter.limit("warm-up");
      let first: Awaited<ReturnType<typeof limiter.limit>> | undefined;
      expect(await commands(async () => (first = await limiter.limit("k")))).toEqual({ evalsha: 1, get: 1, set: 1, ...time });
      expect(first).toMatchObject({ allowed: true, remaining: 2, retryAfterMs: 0 });
      expect(first!.charge).toBeDefined();
      const second = await limiter.limit("k", { cost: 2 });
      expect(second).toMatchObject({ allowed: true, remaining: 0 });
      const before = await h.admin.get(key("k"));
      let denied: Awaited<ReturnType<typeof limiter.limit>> | undefined;
      expect(await commands(async () => (denied = await limiter.limit("k")))).toEqual({ evalsha: 1, get: 1, ...time });
      expect(denied).toMatchObject({ allowed: false, remaining: 0 });
      expect(denied!.retryAfterMs).toBeGreaterThan(0);
      expect(denied!.charge).toBeUndefined();
      expect((await limiter.limit("k", { cost: 4 })).retryAfterMs).toBe(Infinity);
      expect(await h.admin.get(key("k"))).toBe(before);
      // Refunds find the charges the step made.
      await limiter.refund("k", { charge: second.charge!, cost: 2 });
      expect((await limiter.limit("k")).remaining).toBe(1);
    });

    it("block() flags the state; denied while blocked; the next admission after unblock() clears the flag", async () => {
      const { limiter, key } = make(10);
      await limiter.limit("k", { cost: 2 });
      await limiter.block("k", "1h");
      expect(flagged(await h.admin.get(key("k")))).toBe(true);
      expect(await h.admin.pttl(key("k"))).toBeGreaterThan(3_590_000);
      for (let i = 0; i < 3; i++) {
        const d = await limiter.limit("k");
        expect(d.allowed).toBe(false);
        expect(d.retryAfterMs).toBeGreaterThan(3_500_000);
      }
      await limiter.unblock("k");
      expect((await limiter.limit("k")).remaining).toBe(7);
      expect(flagged(await h.admin.get(key("k")))).toBe(false);
      expect(await commands(() => limiter.limit("k"))).toEqual({ evalsha: 1, get: 1, set: 1, ...time });
    });

    it("a block outlives the state it flags: a key whose state would have expired stays blocked", async () => {
      // The state of one charge matters for 20 ms (a bucket refilling 100/s; a 10 ms window).
      const { limiter, key } = make(1, 10);
      await limiter.limit("gone");
      await limiter.block("gone", 1_000);
      await limiter.block("never-charged", 1_000);
      await sleep(120);
      for (const id of ["gone", "never-charged"]) {
        expect(flagged(await h.admin.get(key(id)))).toBe(true);
        const d = await limiter.limit(id);
        expect(d.allowed).toBe(false);
        expect(d.retryAfterMs).toBeGreaterThan(500);
      }
      await sleep(1_000);
      expect((await limiter.limit("gone")).allowed).toBe(true);
      expect((await limiter.limit("never-charged")).allowed).toBe(true);
      expect(flagged(await h.admin.get(key("never-charged")))).toBe(false);
    });

    it("refunds and penalties keep the flag and the block's expiry", async () => {
      const { limiter, key } = make(10);
      const charged = await limiter.limit("k", { cost: 5 });
      await limiter.block("k", "1h");
      await limiter.refund("k", { charge: charged.charge!, cost: 2 });
      expect(flagged(await h.admin.get(key("k")))).toBe(true);
      await limiter.penalty("k", { cost: 1 });
      expect(flagged(await h.admin.get(key("k")))).toBe(true);
      expect(await h.admin.pttl(key("k"))).toBeGreaterThan(3_590_000);
      expect((await limiter.limit("k")).allowed).toBe(false);
      await limiter.unblock("k");
      expect((await limiter.limit("k")).remaining).toBe(5);
    });
  });

  it("a policy's own block, started by a denial, flags the state the single-policy step reads", async () => {
    const prefix = uniquePrefix();
    const store = h.store("server", { denyCache: false });
    const blocking = createRateLimiter({
      policy: kind === "token bucket"
        ? tokenBucket({ capacity: 2, refillRate: 1, block: "1h", name: "p" })
        : slidingWindow({ limit: 2, window: 10, block: "1h", name: "p" }),
      store,
      prefix,
    });
    await blocking.limit("k", { cost: 2 });
    expect((await blocking.limit("k")).allowed).toBe(false);
    expect(KINDS[kind].flagged(await h.admin.get(`${prefix}{k}`))).toBe(true);
    await sleep(50);
    const plain = createRateLimiter({ policy: policy(2, 10), store, prefix });
    const d = await plain.limit("k");
    expect(d.allowed).toBe(false);
    expect(d.retryAfterMs).toBeGreaterThan(3_500_000);
  });

  it("state of another kind under the same key is replaced, as by the general path", async () => {
    const prefix = uniquePrefix();
    const store = h.store("server", { denyCache: false });
    await createRateLimiter({ policy: fixedWindow({ limit: 5, window: "1h" }), store, prefix }).limit("k");
    await h.admin.rpush(`${prefix}{list}`, "x");
    const limiter = createRateLimiter({ policy: policy(10, 3_600_000), store, prefix });
    expect((await limiter.limit("k")).remaining).toBe(9);
    expect((await limiter.limit("k")).remaining).toBe(8);
    expect((await limiter.limit("list")).remaining).toBe(9);
  });
});

describe("sliding window: the first step's state write", () => {
  it("a count within the window is written exactly, below and above 1e14 (past Lua's own number format)", async () => {
    const prefix = uniquePrefix();
    let now = 1_800_000_000_000;
    // limit × window is at most 2^50: a limit of 1.1e14 takes a window of 10 ms.
    const limiter = createRateLimiter({
      policy: slidingWindow({ limit: 110_000_000_000_000, window: 10 }),
      store: h.store("local", { denyCache: false }),
      prefix,
      clock: () => now,
    });
    const index = Math.floor(now / 10);
    // An empty state of this window with a long TTL, which the writes within the window keep: a
    // state the step wrote itself would live for the 10 ms window's TTL, in real time, and a slow
    // machine could let it expire between the calls.
    await h.admin.set(`${prefix}{k}`, `${index}:0:0`, "PX", 60_000);
    await limiter.limit("k", { cost: 99_999_999_999_998 });
    now += 1;
    expect((await limiter.limit("k")).allowed).toBe(true);
    expect(await h.admin.get(`${prefix}{k}`)).toBe(`${index}:99999999999999:0`);
    now += 1;
    expect((await limiter.limit("k")).allowed).toBe(true);
    expect(await h.admin.get(`${prefix}{k}`)).toBe(`${index}:100000000000000:0`);
    now += 1;
    expect((await limiter.limit("k", { cost: 3 })).remaining).toBe(9_999_999_999_997);
    expect(await h.admin.get(`${prefix}{k}`)).toBe(`${index}:100000000000003:0`);
  });
});
