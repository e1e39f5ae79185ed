/**
 * The Redis compound script against the memory store's compound step: random traces of
 * compound consumes over 2 to 4 (policy set, key) pairs (blocking policies included), replayed
 * with an injected clock, give identical answers pair by pair, marks included, and leave
 * identical state (each pair's own consume figures after the trace). Times, windows and token
 * intervals are whole seconds, as in test/redis/equivalence.test.ts.
 */
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fixedWindow, memoryStore, type PolicySet, type RateLimitStore } from "../../packages/core/src/index.ts";
import { uniquePrefix } from "../stores/store-contract.ts";
import { ioredisHarness, type RedisHarness, upstashHarness } from "../redis/harness.ts";
import { GRAIN_MS, policySets } from "../redis/policy-arbitraries.ts";

const T0 = 1_700_000_000_000;
const setsArb = fc.array(
  fc.tuple(
    policySets({ maxLimit: 6, windows: [1, 3, 10, 50], rates: [1, 0.5, 0.2], minPolicies: 1, maxPolicies: 2 }),
    fc.boolean(),
  ).map((
    [policies, blocks],
  ) => (blocks ? [...policies, fixedWindow({ limit: 3, window: "1m", block: "10m", name: "blocking" })] : policies)),
  { minLength: 2, maxLength: 4 },
);
const stepArb = fc.record({
  dt: fc.integer({ min: 0, max: 20 }).map((n) => n * GRAIN_MS),
  keys: fc.array(fc.constantFrom("a", "b"), { minLength: 4, maxLength: 4 }),
  cost: fc.integer({ min: 1, max: 3 }),
});

describe.each([["ioredis", ioredisHarness], ["upstash (bridge)", upstashHarness]] as const)("compound steps: %s", (_, setup) => {
  let harness: RedisHarness;
  beforeAll(async () => {
    harness = await setup();
  });
  afterAll(async () => {
    await harness?.close();
  });

  it("answer as the memory store's compound step does, pair by pair", async () => {
    await fc.assert(
      fc.asyncProperty(setsArb, fc.array(stepArb, { minLength: 1, maxLength: 25 }), async (policySetsDrawn, steps) => {
        const prefix = uniquePrefix();
        const sets: PolicySet[] = policySetsDrawn.map((policies, d) => ({ prefix: `${prefix}${d}:`, policies }));
        const reference: RateLimitStore = memoryStore();
        const subject = harness.store("local", { denyCache: false });
        let now = T0;
        for (const [n, step] of steps.entries()) {
          now += step.dt;
          const calls = sets.map((set, d) => ({ set, key: step.keys[d]! }));
          const expected = await reference.consumeMany!(calls, step.cost, now);
          const actual = await subject.consumeMany!(calls, step.cost, now);
          expect(actual?.map((r) => [...r]), `step ${n}`).toEqual(expected?.map((r) => [...r]));
        }
        for (const set of sets) {
          for (const key of ["a", "b"]) expect([...await subject.peek(set, key, now)]).toEqual([...await reference.peek(set, key, now)]);
        }
      }),
      { numRuns: 40 },
    );
  }, 180_000);
});
