/**
 * Late refunds: random traces of consumes and refunds of earlier admitted requests (arriving
 * after later admissions, after windows changed, after refill; each once, whole or in part), on injected
 * time. Whatever the refunds, the admissions that were not refunded, replayed in time order
 * through the reference models (test/core/models.ts, written independently of the engine), must
 * all be admitted: a refund never gives back more than the refunded request held. And every
 * store decides exactly as the memory store does, charges and marks included.
 *
 * Times, windows and token intervals are multiples of one second (see policy-arbitraries.ts).
 */
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type Charge,
  createRateLimiter,
  type Decision,
  memoryStore,
  type Policy,
  type RateLimitStore,
} from "../../packages/core/src/index.ts";
import { MultiModel } from "../core/models.ts";
import { example, KINDS } from "../support/kinds.ts";
import { uniquePrefix } from "../stores/store-contract.ts";
import { kvStore } from "../../examples/custom-store/kv-store.ts";
import { VersionedMap } from "../../examples/custom-store/versioned-map.ts";
import { clusterHarness, ioredisHarness, nodeRedisHarness, type RedisHarness, upstashHarness } from "./harness.ts";
import { GRAIN_MS, policySets } from "./policy-arbitraries.ts";

const T0 = 1_700_000_000_000;
const policiesArb = policySets({ maxLimit: 4, windows: [1, 2, 3, 5], rates: [1, 0.5, 0.25], minPolicies: 1, maxPolicies: 3 });

type Step =
  | { kind: "consume"; key: string; cost: number; dt: number }
  /** Refunds `part` (taken modulo its cost, 0 meaning all of it) of the `pick`-th admission not refunded yet. */
  | { kind: "refund"; pick: number; part: number; dt: number };

const keyArb = fc.constantFrom("a", "b");
// Mostly small steps, so that windows change and buckets refill between a charge and its refund.
const dtArb = fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 3 }), fc.integer({ min: 4, max: 12 })).map((n) => n * GRAIN_MS);
const stepArb: fc.Arbitrary<Step> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record({ kind: fc.constant("consume" as const), key: keyArb, cost: fc.integer({ min: 1, max: 3 }), dt: dtArb }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("refund" as const), pick: fc.nat(), part: fc.nat(), dt: dtArb }) },
);

interface Admission {
  readonly key: string;
  readonly at: number;
  readonly cost: number;
  /** Per store, the charge its decision carried. */
  readonly charges: (Charge | undefined)[];
  refunded: number;
}

/**
 * Runs `steps` on every store in lockstep (the first is the reference) and checks that all
 * decide alike. After every step, the kept admissions of the key it touched, replayed through the
 * reference models, must all be admitted, and leave at least what the store reports remaining:
 * the store's state is never below the state without the refunded units.
 */
async function check(stores: RateLimitStore[], policies: Policy[], start: number, steps: Step[]): Promise<void> {
  let now = start;
  const prefix = uniquePrefix();
  const limiters = stores.map((store) => createRateLimiter({ policy: policies, store, prefix, clock: () => now }));
  const admissions: Admission[] = [];
  const plain = (d: Decision): unknown => JSON.parse(JSON.stringify({ ...d, policies: d.policies, charge: d.charge }));
  for (const [n, step] of steps.entries()) {
    now += step.dt;
    let key: string;
    if (step.kind === "consume") {
      key = step.key;
      const decisions: Decision[] = [];
      for (const limiter of limiters) decisions.push(await limiter.limit(step.key, { cost: step.cost }));
      const [reference, ...others] = decisions.map(plain);
      for (const [s, other] of others.entries()) expect(other, `step ${n}: ${stores[s + 1]!.name} vs memory`).toEqual(reference);
      if (decisions[0]!.allowed) {
        admissions.push({
          key: step.key,
          at: now,
          cost: step.cost,
          charges: decisions.map((d) => d.charge),
          refunded: 0,
        });
      }
    } else {
      // A charge is refunded once (in whole or in part), as the HTTP layer does.
      const open = admissions.filter((a) => a.refunded === 0);
      if (open.length === 0) continue;
      const target = open[step.pick % open.length]!;
      key = target.key;
      const cost = target.cost - (step.part % target.cost);
      for (const [s, limiter] of limiters.entries()) await limiter.refund(target.key, { cost, charge: target.charges[s] });
      target.refunded += cost;
    }
    const model = new MultiModel(policies);
    for (const a of admissions) {
      if (a.key !== key || a.refunded === a.cost) continue;
      const kept = a.cost - a.refunded;
      expect(
        model.limit(a.at, kept).allowed,
        `step ${n}: ${kept} of the admission at +${a.at - start} ms, replayed without the refunded units`,
      ).toBe(true);
    }
    const peeks: Decision[] = [];
    for (const limiter of limiters) peeks.push(await limiter.peek(key));
    const [reference, ...others] = peeks.map(plain);
    for (const [s, other] of others.entries()) expect(other, `step ${n}: peek, ${stores[s + 1]!.name} vs memory`).toEqual(reference);
    const bound = model.models.map((m) => m.remaining(now));
    for (const [p, figures] of peeks[0]!.policies.entries()) {
      expect(figures.remaining, `step ${n}: ${figures.policy} remaining at most what the kept admissions leave`).toBeLessThanOrEqual(
        bound[p]!,
      );
    }
  }
}

const property = (stores: () => RateLimitStore[], policies: fc.Arbitrary<Policy[]> = policiesArb) =>
  fc.asyncProperty(
    policies,
    fc.integer({ min: 0, max: 600 }).map((n) => T0 + n * GRAIN_MS),
    fc.array(stepArb, { minLength: 1, maxLength: 40 }),
    (policies, start, steps) => check(stores(), policies, start, steps),
  );

describe("late refunds: memory store and the compare-and-set store", () => {
  it("keep every unrefunded admission within the exact algorithm, and both stores agree", async () => {
    await fc.assert(property(() => [memoryStore(), kvStore(new VersionedMap())]), { numRuns: 400 });
  }, 120_000);
});

describe.each(KINDS)("late refunds, %s alone: memory store", (kind) => {
  it("keep every unrefunded admission within the exact algorithm", async () => {
    // A bucket refilled over `limit` × n grains, or a window of n grains.
    const one = fc.record({ limit: fc.integer({ min: 1, max: 4 }), n: fc.constantFrom(1, 2, 3, 5) })
      .map((
        { limit, n },
      ) => [Object.freeze({ ...example(kind, limit, (kind === "token-bucket" ? limit : 1) * n * GRAIN_MS), name: "p0" })]);
    await fc.assert(property(() => [memoryStore()], one), { numRuns: 300 });
  }, 60_000);
});

const FLAVOURS: [string, () => Promise<RedisHarness>, number][] = [
  ["ioredis", ioredisHarness, 150],
  ["node-redis", nodeRedisHarness, 100],
  ["upstash (bridge)", upstashHarness, 100],
  ["ioredis Cluster", () => clusterHarness(), 50],
];

describe.each(FLAVOURS)("late refunds: %s", (_name, setup, numRuns) => {
  let h: RedisHarness;
  beforeAll(async () => {
    h = await setup();
  }, 60_000);
  afterAll(async () => {
    await h?.close();
  });

  it("keep every unrefunded admission within the exact algorithm, deciding as the memory store does", async () => {
    await fc.assert(property(() => [memoryStore(), h.store("local", { denyCache: false })]), { numRuns });
  }, 180_000);
});
