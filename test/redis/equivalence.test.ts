/**
 * Equivalence: random traces (time steps, identifiers, costs, policy sets, operations) replayed
 * with an injected clock give identical store results on the memory store (the specification,
 * src/algorithms/) and on each Redis store running the Lua scripts (`clock: "local"`).
 *
 * Times, windows and token intervals are multiples of one second, so a key's remaining TTL in
 * injected time is either 0 or at least 1 s: the real time a trace takes (milliseconds; a few
 * hundred on a loaded machine, where a 100 ms grain once let Redis expire a key the memory
 * store still counted) never expires such a key.
 */
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fixedWindow, memoryStore, type PolicySet, type RateLimitStore, tokenBucket } from "../../packages/core/src/index.ts";
import { example, KINDS } from "../support/kinds.ts";
import { uniquePrefix } from "../stores/store-contract.ts";
import { ioredisHarness, nodeRedisHarness, type RedisHarness, upstashHarness } from "./harness.ts";
import { GRAIN_MS, policySets } from "./policy-arbitraries.ts";

const T0 = 1_700_000_000_000;
const policiesArb = policySets({
  maxLimit: 8,
  windows: [1, 3, 10, 20, 50, 600],
  rates: [1, 0.5, 0.25, 0.2, 0.1],
  minPolicies: 1,
  maxPolicies: 3,
});

type Op =
  | { kind: "consume"; key: string; cost: number; dt: number }
  | { kind: "peek"; key: string; dt: number }
  | { kind: "refund"; key: string; cost: number; dt: number }
  | { kind: "reset"; key: string; dt: number };

const keyArb = fc.constantFrom("a", "b", "user:1");
function opArb(backwards: boolean, refunds: boolean): fc.Arbitrary<Op> {
  const dt = (backwards ? fc.integer({ min: -20, max: 30 }) : fc.integer({ min: 0, max: 30 })).map((n) => n * GRAIN_MS);
  const ops: fc.Arbitrary<Op>[] = [
    fc.record({ kind: fc.constant("consume" as const), key: keyArb, cost: fc.integer({ min: 1, max: 4 }), dt }),
    fc.record({ kind: fc.constant("consume" as const), key: keyArb, cost: fc.constant(1), dt }),
    fc.record({ kind: fc.constant("peek" as const), key: keyArb, dt }),
    fc.record({ kind: fc.constant("reset" as const), key: keyArb, dt }),
  ];
  if (refunds) ops.push(fc.record({ kind: fc.constant("refund" as const), key: keyArb, cost: fc.integer({ min: 1, max: 3 }), dt }));
  return fc.oneof(...ops);
}

async function replay(
  reference: RateLimitStore,
  subject: RateLimitStore,
  set: PolicySet,
  start: number,
  ops: Op[],
  compare: "figures" | "decisions",
): Promise<void> {
  let now = start;
  for (const [step, op] of ops.entries()) {
    now += op.dt;
    const where = `step ${step} (${op.kind} ${op.key} at +${now - start} ms)`;
    if (op.kind === "consume" || op.kind === "peek") {
      const expected = op.kind === "consume" ? await reference.consume(set, op.key, op.cost, now) : await reference.peek(set, op.key, now);
      const actual = op.kind === "consume" ? await subject.consume(set, op.key, op.cost, now) : await subject.peek(set, op.key, now);
      if (compare === "figures") expect([...actual], where).toEqual([...expected]);
      else expect(actual[0], where).toBe(expected[0]);
    } else if (op.kind === "refund") {
      await reference.refund(set, op.key, op.cost, now);
      await subject.refund(set, op.key, op.cost, now);
    } else {
      await reference.reset(set, op.key);
      await subject.reset(set, op.key);
    }
  }
}

const FLAVOURS: [string, () => Promise<RedisHarness>][] = [
  ["ioredis", ioredisHarness],
  ["node-redis", nodeRedisHarness],
  ["upstash (bridge)", upstashHarness],
];

describe.each(FLAVOURS)("equivalence with the memory store: %s", (_name, setup) => {
  let h: RedisHarness;
  beforeAll(async () => {
    h = await setup();
  });
  afterAll(async () => {
    await h?.close();
  });

  const check = (backwards: boolean, refunds: boolean, denyCache: boolean, numRuns: number) =>
    fc.assert(
      fc.asyncProperty(
        policiesArb,
        fc.integer({ min: 0, max: 600 }).map((n) => T0 + n * GRAIN_MS),
        fc.array(opArb(backwards, refunds), { minLength: 1, maxLength: 40 }),
        async (policies, start, ops) => {
          const set: PolicySet = Object.freeze({ prefix: uniquePrefix(), policies: Object.freeze(policies) });
          const subject = h.store("local", { denyCache });
          await replay(memoryStore(), subject, set, start, ops, denyCache ? "decisions" : "figures");
        },
      ),
      { numRuns },
    );

  it("identical results on forward-moving time, with refunds and resets", async () => {
    await check(false, true, false, 150);
  }, 120_000);

  it("identical results when the clock also steps backwards", async () => {
    await check(true, false, false, 100);
  }, 120_000);

  it("identical decisions with the deny cache on (it never decides otherwise)", async () => {
    await check(false, true, true, 100);
    await check(true, false, true, 50);
  }, 120_000);

  it("identical results at microsecond times on one forward-moving trace", async () => {
    // Fractional milliseconds exercise toMicros; windows are long so no key expires meanwhile.
    const policies = [
      ...KINDS.map((kind, i) => example(kind, 5 + i, 60_000)),
      // A bucket whose µs per token is rounded (1/3 s: 333,333 µs).
      tokenBucket({ capacity: 5, refillRate: 3 }),
      fixedWindow({ limit: 9, window: "1h" }),
    ].map((p, i) => Object.freeze({ ...p, name: `q${i}` }));
    for (const one of [...policies.map((p) => [p]), policies]) {
      const set: PolicySet = Object.freeze({ prefix: uniquePrefix(), policies: Object.freeze(one) });
      const reference = memoryStore();
      const subject = h.store("local", { denyCache: false });
      let now = T0 + 0.1234;
      for (let i = 0; i < 200; i++) {
        now += ((i * 7919) % 997) * 1.001 + 0.001;
        const cost = 1 + (i % 3);
        expect([...(await subject.consume(set, "z", cost, now))], `step ${i}`).toEqual([...(await reference.consume(set, "z", cost, now))]);
      }
    }
  }, 120_000); // one set per kind and one of all: the Upstash bridge takes its time on a loaded machine
});
