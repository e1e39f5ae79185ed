/**
 * Several policies on Redis: random traces (two to four policies, kinds repeated with different
 * windows, refunds, resets, clock steps back) checked against the memory store, and after every
 * step the keys in Redis: every key of an identifier carries a TTL no longer than its policy
 * needs, no key outlives a reset, and an identifier's keys are exactly `prefix{id}` and `:1`...
 * Also concurrency with several policies: all charged together or none.
 */
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createRateLimiter,
  fixedWindow,
  memoryStore,
  type Policy,
  type PolicySet,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from "../../packages/core/src/index.ts";
import { retentionMs } from "../support/kinds.ts";
import { uniquePrefix } from "../stores/store-contract.ts";
import { ioredisHarness, nodeRedisHarness, type RedisHarness, upstashHarness } from "./harness.ts";
import { GRAIN_MS, policySets } from "./policy-arbitraries.ts";

const T0 = 1_700_000_000_000;
const policiesArb = policySets({ maxLimit: 6, windows: [1, 3, 10, 20, 600], rates: [1, 0.5, 0.1], minPolicies: 2, maxPolicies: 4 });

/** The longest a policy's state can matter, measured from the newest time it has seen. */
function needMs(p: Policy): number {
  return retentionMs(p);
}

type Op = { kind: "consume" | "peek" | "refund" | "reset"; key: string; cost: number; dt: number };
const opArb = (backwards: boolean): fc.Arbitrary<Op> =>
  fc.record({
    // A refund to a full token bucket keeps the key 1 ms: with the clock then stepping back, the
    // memory store remembers it and Redis does not (as in equivalence.test.ts, no refunds then).
    kind: backwards
      ? fc.constantFrom("consume", "consume", "consume", "peek", "reset")
      : fc.constantFrom("consume", "consume", "consume", "peek", "refund", "reset"),
    key: fc.constantFrom("a", "b"),
    cost: fc.integer({ min: 1, max: 7 }),
    dt: (backwards ? fc.integer({ min: -15, max: 30 }) : fc.integer({ min: 0, max: 30 })).map((n) => n * GRAIN_MS),
  });

const FLAVOURS: [string, () => Promise<RedisHarness>][] = [
  ["ioredis", ioredisHarness],
  ["node-redis", nodeRedisHarness],
  ["upstash (bridge)", upstashHarness],
];

describe.each(FLAVOURS)("several policies on Redis: %s", (_name, setup) => {
  let h: RedisHarness;
  beforeAll(async () => {
    h = await setup();
  });
  afterAll(async () => {
    await h?.close();
  });

  it.each([false, true])(
    "random traces: same figures as the memory store, every key's TTL bounded, only the identifier's keys (clock back: %s)",
    async (backwards) => {
      await fc.assert(
        fc.asyncProperty(policiesArb, fc.array(opArb(backwards), { minLength: 1, maxLength: 30 }), async (policies, ops) => {
          const prefix = uniquePrefix();
          const set: PolicySet = Object.freeze({ prefix, policies: Object.freeze(policies) });
          const reference = memoryStore();
          const subject = h.store("local", { denyCache: false });
          let now = T0;
          let newest = T0;
          // Injected time does not age keys in Redis: a TTL is checked at the step that set it.
          const seen = new Map<string, number>();
          for (const [step, op] of ops.entries()) {
            now += op.dt;
            newest = Math.max(newest, now);
            const where = `step ${step}: ${op.kind} ${op.key} cost ${op.cost} at +${now - T0}`;
            if (op.kind === "consume") {
              expect([...(await subject.consume(set, op.key, op.cost, now))], where).toEqual([
                ...(await reference.consume(set, op.key, op.cost, now)),
              ]);
            } else if (op.kind === "peek") {
              expect([...(await subject.peek(set, op.key, now))], where).toEqual([...(await reference.peek(set, op.key, now))]);
            } else if (op.kind === "refund") {
              await subject.refund(set, op.key, op.cost, now);
              reference.refund(set, op.key, op.cost, now);
            } else {
              await subject.reset(set, op.key);
              reference.reset(set, op.key);
            }
            const keys = (await h.admin.keys(`${prefix}*`)).sort();
            for (const k of keys) {
              const m = /^.*\{(a|b)\}(?::(\d+))?$/.exec(k);
              expect(m, `${where}: unexpected key ${k}`).not.toBeNull();
              const index = m![2] === undefined ? 0 : Number(m![2]);
              expect(index, `${where}: key ${k} beyond the policies`).toBeLessThan(policies.length);
              if (op.kind === "reset") expect(m![1], `${where}: ${k} survived its reset`).not.toBe(op.key);
              const ttl = await h.admin.pttl(k);
              // 0 or -2: a state refunded to empty is kept 1 ms (PX 1) and may have just expired.
              expect(ttl, `${where}: ${k} has no TTL`).not.toBe(-1);
              const before = seen.get(k);
              seen.set(k, ttl);
              if (before !== undefined && Math.abs(before - ttl) <= 20) continue;
              expect(ttl, `${where}: ${k} (${policies[index]!.kind}) TTL`).toBeLessThanOrEqual(
                needMs(policies[index]!) + (newest - now) + 1,
              );
            }
          }
        }),
        { numRuns: backwards ? 60 : 100 },
      );
    },
    180_000,
  );

  it("many concurrent calls with several policies charge all or none (server time)", async () => {
    const prefix = uniquePrefix();
    const policies = [
      tokenBucket({ capacity: 30, refillRate: 0.001, name: "tb" }),
      fixedWindow({ limit: 25, window: "1d", name: "fw" }),
      slidingLog({ limit: 40, window: "1d", name: "log" }),
      slidingLog({ limit: 27, window: "1h", name: "log2" }),
      slidingWindow({ limit: 50, window: "1d", name: "sw" }),
    ];
    const stores = [h.store("server"), h.store("server"), h.store("server", { denyCache: false })];
    const limiters = stores.map((store) => createRateLimiter({ policy: policies, store, prefix }));
    const calls = Array.from({ length: 300 }, (_, n) => limiters[n % 3]!.limit("hot", { cost: 1 + (n % 2) }));
    const decisions = await Promise.all(calls);
    const charged = decisions.reduce((sum, d, n) => sum + (d.allowed ? 1 + (n % 2) : 0), 0);
    expect(charged).toBeGreaterThanOrEqual(24);
    expect(charged).toBeLessThanOrEqual(25);
    const peeked = await limiters[2]!.peek("hot");
    expect(peeked.policies.map((p) => p.limit - p.remaining)).toEqual([charged, charged, charged, charged, charged]);
  }, 60_000);
});

describe("deny cache with several policies (ioredis, injected time)", () => {
  let h: RedisHarness;
  beforeAll(async () => {
    h = await ioredisHarness();
  });
  afterAll(async () => {
    await h?.close();
  });

  it("a larger cost after a denial gets the store's binding policy and wait, not the cached ones", async () => {
    const now = 1_700_002_800_000 + 5000; // 5 s into an hour
    const policies = [tokenBucket({ capacity: 2, refillRate: 1, name: "burst" }), fixedWindow({ limit: 3, window: "1h", name: "hourly" })];
    const prefix = uniquePrefix();
    const cached = createRateLimiter({ policy: policies, store: h.store("local"), prefix, clock: () => now });
    const direct = createRateLimiter({ policy: policies, store: h.store("local", { denyCache: false }), prefix, clock: () => now });
    for (let i = 0; i < 2; i++) expect((await cached.limit("u")).allowed).toBe(true);
    const first = await cached.limit("u"); // the bucket is empty; the hour has 1 left
    expect([first.allowed, first.policy, first.retryAfterMs]).toEqual([false, "burst", 1000]);
    const truth = await direct.limit("u", { cost: 2 });
    expect([truth.allowed, truth.policy, truth.retryAfterMs]).toEqual([false, "hourly", 3_595_000]);
    const answered = await cached.limit("u", { cost: 2 });
    expect({ ...answered }).toEqual({ ...truth });
  });
});
