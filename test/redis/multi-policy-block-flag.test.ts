/**
 * The multi-policy and reserve scripts read the block key only when the set's first policy's state
 * may be blocked (lua.ts `readBlock`): a token bucket or sliding window counter first, whose state
 * a block leaves present and flagged until it ends (block-flag.ts), proves an unflagged key
 * unblocked; any other first kind still reads the block key on every call. The first admission
 * after a block removes the flag, as the single-policy step does.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCompoundLimiter, createRateLimiter, fixedWindow, slidingWindow, tokenBucket } from "../../packages/core/src/index.ts";
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

/** Per first kind: a policy of `limit` per hour, and whether its stored state carries the flag. */
const FIRST = {
  "token bucket": {
    policy: (limit: number, name: string): Policy => tokenBucket({ capacity: limit, refillRate: limit / 3600, name }),
    flagged: (raw: string | null) => raw !== null && Number(raw) <= -FLAG,
  },
  "sliding window": {
    policy: (limit: number, name: string): Policy => slidingWindow({ limit, window: "1h", name }),
    flagged: (raw: string | null) => raw !== null && Number(raw.split(":")[1]) >= FLAG,
  },
} as const;

describe.each(Object.keys(FIRST) as (keyof typeof FIRST)[])("%s first", (kind) => {
  const { policy, flagged } = FIRST[kind];
  const make = (limit = 10) => {
    const prefix = uniquePrefix();
    const policies = [policy(limit, "first"), fixedWindow({ limit: 1000, window: "1h", name: "second" })];
    const limiter = createRateLimiter({ policy: policies, store: h.store("server", { denyCache: false }), prefix });
    return { limiter, key: `${prefix}{k}` };
  };

  it("an unblocked key's decision reads no block key: two GETs for two policies", async () => {
    const { limiter } = make(2);
    await limiter.peek("k"); // loads the scripts
    // A new key: each policy's state written with its expiry.
    expect(await commands(() => limiter.limit("k"))).toEqual({ evalsha: 1, time: 1, get: 2, set: 2 });
    // Within the fixed window's window: its count is one INCRBY.
    expect(await commands(() => limiter.limit("k"))).toEqual({ evalsha: 1, time: 1, get: 2, set: 1, incrby: 1 });
    // A denial reads the same and writes nothing.
    expect(await commands(() => limiter.limit("k"))).toEqual({ evalsha: 1, time: 1, get: 2 });
  });

  it("block() flags the first state: denied while blocked; the first admission after it clears the flag", async () => {
    const { limiter, key } = make();
    await limiter.limit("k", { cost: 2 });
    await limiter.block("k", "1h");
    expect(flagged(await h.admin.get(key))).toBe(true);
    let d: Awaited<ReturnType<typeof limiter.limit>> | undefined;
    expect(await commands(async () => (d = await limiter.limit("k")))).toEqual({ evalsha: 1, time: 1, get: 3 });
    expect(d).toMatchObject({ allowed: false, remaining: 0 });
    expect(d!.retryAfterMs).toBeGreaterThan(3_500_000);
    await limiter.unblock("k");
    // The flag makes this one read the block key; it finds none, admits, and writes the state unflagged.
    expect(await commands(async () => (d = await limiter.limit("k")))).toEqual({ evalsha: 1, time: 1, get: 3, set: 1, incrby: 1 });
    expect(d).toMatchObject({ allowed: true, remaining: 7 });
    expect(flagged(await h.admin.get(key))).toBe(false);
    expect(await commands(() => limiter.limit("k"))).toEqual({ evalsha: 1, time: 1, get: 2, set: 1, incrby: 1 });
  });

  it("a block that ran out: the next admission clears the flag; a key never charged stays blocked until then", async () => {
    const { limiter, key } = make();
    await limiter.limit("k");
    await limiter.block("k", 300);
    await limiter.block("never", 300);
    expect((await limiter.limit("never")).allowed).toBe(false);
    await sleep(400);
    expect((await limiter.limit("k")).remaining).toBe(8);
    expect((await limiter.limit("never")).remaining).toBe(9);
    expect(flagged(await h.admin.get(key))).toBe(false);
  });

  it("a block started by a blocking set's denial holds for a set of the same keys without block options", async () => {
    const prefix = uniquePrefix();
    const store = h.store("server", { denyCache: false });
    const second = fixedWindow({ limit: 1000, window: "1h", name: "second" });
    const blockingFirst = kind === "token bucket"
      ? tokenBucket({ capacity: 2, refillRate: 2 / 3600, name: "first", block: "1h" })
      : slidingWindow({ limit: 2, window: "1h", name: "first", block: "1h" });
    const blocking = createRateLimiter({ policy: [blockingFirst, second], store, prefix });
    await blocking.limit("k", { cost: 2 });
    expect((await blocking.limit("k")).allowed).toBe(false);
    expect(flagged(await h.admin.get(`${prefix}{k}`))).toBe(true);
    // The same policies without block options: the state is flagged, so the block key is read.
    const plain = createRateLimiter({ policy: [policy(2, "first"), second], store, prefix });
    const d = await plain.limit("k");
    expect(d.allowed).toBe(false);
    expect(d.retryAfterMs).toBeGreaterThan(3_500_000);
  });

  it("reservations: the reserve script reads the block key only for a flagged state", async () => {
    const { limiter } = make();
    await limiter.peek("k");
    let r: Awaited<ReturnType<typeof limiter.reserve>> | undefined;
    const unblocked = await commands(async () => (r = await limiter.reserve("k", { estimate: 2 })));
    expect(r!.decision.allowed).toBe(true);
    expect(unblocked.get).toBe(2);
    await limiter.block("k", "1h");
    const blocked = await commands(async () => (r = await limiter.reserve("k", { estimate: 2 })));
    expect(r!.decision.allowed).toBe(false);
    expect(blocked.get).toBe(3);
    expect(blocked.set).toBeUndefined();
  });
});

describe("another kind first", () => {
  it("a fixed window first still reads the block key on every decision, and honours a block", async () => {
    const prefix = uniquePrefix();
    const policies = [
      fixedWindow({ limit: 10, window: "1h", name: "first" }),
      tokenBucket({ capacity: 10, refillRate: 1, name: "second" }),
    ];
    const limiter = createRateLimiter({ policy: policies, store: h.store("server", { denyCache: false }), prefix });
    await limiter.limit("k");
    const admitted = await commands(() => limiter.limit("k"));
    expect(admitted.get).toBe(3);
    await limiter.block("k", "1h");
    expect((await limiter.limit("k")).allowed).toBe(false);
  });
});

describe("compound decisions", () => {
  it("read a pair's block key only when its first state is flagged, or of a kind without the flag", async () => {
    const prefix = uniquePrefix();
    const store = h.store("server", { denyCache: false });
    const dims = {
      user: createRateLimiter({ policy: tokenBucket({ capacity: 10, refillRate: 1 }), store, prefix: `${prefix}u:` }),
      ip: createRateLimiter({ policy: slidingWindow({ limit: 10, window: "1h" }), store, prefix: `${prefix}i:` }),
      org: createRateLimiter({ policy: fixedWindow({ limit: 10, window: "1h" }), store, prefix: `${prefix}o:` }),
    };
    const compound = createCompoundLimiter({ dimensions: dims });
    const keys = { user: "u1", ip: "10.0.0.1", org: "acme" };
    await compound.limit(keys);
    // Three states and the fixed window's block key: none for the bucket's and the window's.
    expect((await commands(() => compound.limit(keys))).get).toBe(4);
    await dims.ip.block("10.0.0.1", "1h");
    let d: Awaited<ReturnType<typeof compound.limit>> | undefined;
    expect((await commands(async () => (d = await compound.limit(keys)))).get).toBe(5);
    expect(d).toMatchObject({ allowed: false, dimension: "ip" });
    expect(d!.retryAfterMs).toBeGreaterThan(3_500_000);
    await dims.ip.unblock("10.0.0.1");
    expect((await compound.limit(keys)).allowed).toBe(true);
    expect(FIRST["sliding window"].flagged(await h.admin.get(`${prefix}i:{10.0.0.1}`))).toBe(false);
    expect((await commands(() => compound.limit(keys))).get).toBe(4);
  });
});
