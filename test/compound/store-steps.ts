/**
 * Checks of a database store's compound step (RateLimitStore.consumeMany), shared by the stores'
 * own suites (test/postgres/compound.test.ts, test/mysql/compound.test.ts...):
 *
 * - `expectLikeMemory`: random traces of compound consumes over 2 to 4 (policy set, key) pairs,
 *   blocking policies included, replayed on an injected clock, answer pair by pair as the memory
 *   store's compound step does, marks included, and leave the same state.
 * - `raceCompound`: many concurrent compound decisions, half naming the dimensions in one order
 *   and half in the opposite one, over a shared organisation, a shared global key and a user:
 *   exactly the organisation's limit is admitted, every dimension holds exactly the admitted
 *   calls, and no call fails (no deadlock surfaces). A hot user's limit refuses most calls, after
 *   the organisation was charged when the step charges one dimension at a time: such a step
 *   holds organisation units it then gives back, refuses calls it should admit meanwhile, and
 *   admits fewer than the limit.
 */
import fc from "fast-check";
import { expect } from "vitest";
import {
  createCompoundLimiter,
  createRateLimiter,
  fixedWindow,
  memoryStore,
  type PolicySet,
  type RateLimitStore,
} from "../../packages/core/src/index.ts";
import { uniquePrefix } from "../stores/store-contract.ts";
import { GRAIN_MS, policySets } from "../redis/policy-arbitraries.ts";
import { type RateKind, SQL_RATE_KINDS } from "../support/kinds.ts";

const T0 = 1_700_000_000_000;

/** The memory store's answers, step by step, against `subject` (a store on an injected clock). */
export async function expectLikeMemory(
  subject: () => RateLimitStore,
  numRuns = 30,
  kinds: readonly RateKind[] = SQL_RATE_KINDS,
): Promise<void> {
  const setsArb = fc.array(
    fc.tuple(
      policySets({ maxLimit: 6, windows: [1, 3, 10, 50], rates: [1, 0.5, 0.2], minPolicies: 1, maxPolicies: 2, kinds }),
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
  await fc.assert(
    fc.asyncProperty(setsArb, fc.array(stepArb, { minLength: 1, maxLength: 20 }), async (drawn, steps) => {
      const prefix = uniquePrefix();
      const sets: PolicySet[] = drawn.map((policies, d) => ({ prefix: `${prefix}${d}:`, policies }));
      const reference: RateLimitStore = memoryStore();
      const store = subject();
      let now = T0;
      for (const [n, step] of steps.entries()) {
        now += step.dt;
        const calls = sets.map((set, d) => ({ set, key: step.keys[d]! }));
        const expected = await reference.consumeMany!(calls, step.cost, now);
        const actual = await store.consumeMany!(calls, step.cost, now);
        expect(actual?.map((r) => [...r]), `step ${n}`).toEqual(expected?.map((r) => [...r]));
      }
      for (const set of sets) {
        for (const key of ["a", "b"]) expect([...await store.peek(set, key, now)]).toEqual([...await reference.peek(set, key, now)]);
      }
    }),
    { numRuns },
  );
}

export interface RaceOptions {
  /** Concurrent callers (one compound decision in flight each), and decisions per caller. */
  readonly callers: number;
  readonly calls: number;
  readonly orgLimit: number;
  readonly userLimit: number;
}

export interface RaceResult {
  readonly admitted: number;
  readonly paths: ReadonlySet<string>;
}

/**
 * See the comment at the top. Most calls are one hot user's, refused by the user's limit once it
 * is spent; the others are each a user of its own, just enough of them, spread through the race,
 * that the organisation's limit is reached only when none is refused wrongly. Every decision goes
 * through `store`, with no deadline (the question is what the store decides, not how fast).
 */
export async function raceCompound(store: RateLimitStore, o: RaceOptions): Promise<RaceResult> {
  const prefix = uniquePrefix();
  const dim = (name: string, limit: number) =>
    createRateLimiter({ policy: fixedWindow({ limit, window: "1h" }), store, prefix: `${prefix}${name}:`, resilience: false });
  const [org, user, global] = [dim("org", o.orgLimit), dim("user", o.userLimit), dim("global", 1_000_000)];
  const forward = createCompoundLimiter({ dimensions: { org, global, user } });
  const backward = createCompoundLimiter({ dimensions: { user, global, org } });
  const total = o.callers * o.calls;
  const own = o.orgLimit - o.userLimit + 2;
  const step = Math.floor(total / own);
  const failures: unknown[] = [];
  const admittedBy = new Map<string, number>();
  await Promise.all(Array.from({ length: o.callers }, async (_, c) => {
    for (let i = 0; i < o.calls; i++) {
      const q = i * o.callers + c;
      const who = q % step === 0 && q / step < own ? `own${q}` : "hot";
      const compound = i % 2 === 0 ? forward : backward;
      try {
        const d = await compound.limit({ org: "acme", user: who, global: "all" });
        if (d.allowed) admittedBy.set(who, (admittedBy.get(who) ?? 0) + 1);
      } catch (error) {
        failures.push(error);
      }
    }
  }));
  expect(failures, String(failures[0])).toEqual([]);
  const admitted = [...admittedBy.values()].reduce((a, b) => a + b, 0);
  expect(admitted).toBe(o.orgLimit);
  expect((await org.peek("acme")).remaining).toBe(0);
  expect((await global.peek("all")).remaining).toBe(1_000_000 - admitted);
  expect((await user.peek("hot")).remaining).toBe(o.userLimit - (admittedBy.get("hot") ?? 0));
  for (const [who, n] of admittedBy) expect((await user.peek(who)).remaining, who).toBe(o.userLimit - n);
  return { admitted, paths: new Set([forward.path, backward.path]) };
}
