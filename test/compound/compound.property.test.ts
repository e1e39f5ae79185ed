/**
 * Compound decisions against the reference models: on one memory store (the compound store step)
 * and across several memory stores (dimensions charged one by one, given back on a refusal),
 * sequentially decision for decision, and under concurrency (never more than any dimension
 * admits; a denial leaves every dimension as it was once its give-backs have finished).
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  createCompoundLimiter,
  createRateLimiter,
  fixedWindow,
  memoryStore,
  type Policy,
  type RateLimiter,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from "../../packages/core/src/index.ts";
import { example, KINDS } from "../support/kinds.ts";
import { MultiModel } from "../core/models.ts";

const START = 1_767_225_600_000; // 2026-01-01T00:00:00Z, a multiple of every window below

const policyArb: fc.Arbitrary<Policy> = fc.oneof(
  fc.record({ kind: fc.constantFrom(...KINDS), limit: fc.integer({ min: 1, max: 8 }), window: fc.integer({ min: 5, max: 400 }) })
    .map(({ kind, limit, window }) => example(kind, limit, window)),
  fc.record({ capacity: fc.integer({ min: 1, max: 8 }), refillRate: fc.constantFrom(1, 2.5, 3, 10, 7, 40) }).map((o) => tokenBucket(o)),
);
const setArb = fc.array(policyArb, { minLength: 1, maxLength: 2 }).map((ps) =>
  ps.map((p, i) => Object.freeze({ ...p, name: `${p.name}#${i}` }))
);
/** 2 to 4 dimensions, each with its own policy set. */
const dimsArb = fc.array(setArb, { minLength: 2, maxLength: 4 });
const stepArb = fc.record({
  dt: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 50 }), fc.integer({ min: 0, max: 1500 })),
  keys: fc.array(fc.constantFrom("a", "b", "c"), { minLength: 4, maxLength: 4 }),
  cost: fc.oneof(fc.constant(1), fc.integer({ min: 1, max: 4 })),
});

const NAMES = ["user", "org", "ip", "global"];

/** Dimensions on one store (`shared`), or each on a store of its own. */
function limiters(sets: readonly Policy[][], clock: () => number, shared: boolean): Record<string, RateLimiter> {
  const store = memoryStore();
  return Object.fromEntries(
    sets.map((
      policy,
      d,
    ) => [NAMES[d]!, createRateLimiter({ policy, clock, store: shared ? store : memoryStore(), prefix: `${NAMES[d]}:` })]),
  );
}

describe.each(
  [
    ["one memory store (the compound store step)", true, "store"],
    ["a memory store per dimension (one by one, given back on a refusal)", false, "ordered"],
  ] as const,
)("compound decisions on %s agree with the reference models", (_, shared, path) => {
  it("decision for decision, on random traces of times, keys, costs and dimensions", async () => {
    await fc.assert(
      fc.asyncProperty(dimsArb, fc.array(stepArb, { minLength: 1, maxLength: 50 }), async (sets, steps) => {
        let now = START;
        const compound = createCompoundLimiter({ dimensions: limiters(sets, () => now, shared) });
        expect(compound.path).toBe(path);
        const models = new Map<string, MultiModel>();
        const modelOf = (d: number, key: string): MultiModel => {
          const id = `${d}/${key}`;
          let m = models.get(id);
          if (m === undefined) models.set(id, m = new MultiModel(sets[d]!));
          return m;
        };
        for (const step of steps) {
          now += step.dt;
          const keys = Object.fromEntries(sets.map((_, d) => [NAMES[d]!, step.keys[d]!]));
          const fits = sets.map((_, d) => modelOf(d, step.keys[d]!).fits(now, step.cost));
          const expected = fits.every(Boolean);
          const decision = await compound.limit(keys, { cost: step.cost });
          expect(decision.allowed).toBe(expected);
          // Each dimension's own verdict is the model's (on the ordered path, those after a refusal are peeked at cost 1).
          const refused = fits.indexOf(false);
          sets.forEach((_, d) => {
            if (shared || refused === -1 || d <= refused) expect(decision.dimensions[NAMES[d]!]!.allowed).toBe(fits[d]);
          });
          if (!expected) {
            expect(decision.charge).toBeUndefined();
            expect(decision.dimensions[decision.dimension]!.allowed).toBe(false);
            expect(decision.retryAfterMs).toBeGreaterThan(0);
          } else {
            sets.forEach((_, d) => modelOf(d, step.keys[d]!).limit(now, step.cost));
            expect(decision.charge?.cost).toBe(step.cost);
          }
          // Every dimension's state is the model's: a denial charged none of them.
          for (let d = 0; d < sets.length; d++) {
            const peek = await compound.dimensions[NAMES[d]!]!.peek(step.keys[d]!);
            expect(peek.policies.map((p) => p.remaining)).toEqual(modelOf(d, step.keys[d]!).models.map((m) => m.remaining(now)));
          }
        }
      }),
      { numRuns: 120 },
    );
  });
});

describe("compound decisions under concurrency, dimensions charged one by one", () => {
  const windowKinds = [
    (limit: number) => fixedWindow({ limit, window: "1h" }),
    (limit: number) => slidingWindow({ limit, window: "1h" }),
    (limit: number) => slidingLog({ limit, window: "1h" }),
    (limit: number) => tokenBucket({ capacity: limit, refillRate: 0.001 }),
  ];
  it("never admit more than a dimension's limit, and leave refused requests' units nowhere once given back", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.record({ kind: fc.integer({ min: 0, max: 3 }), limit: fc.integer({ min: 1, max: 12 }) }), {
          minLength: 2,
          maxLength: 4,
        }),
        fc.array(
          fc.record({ keys: fc.array(fc.constantFrom("a", "b"), { minLength: 4, maxLength: 4 }), cost: fc.integer({ min: 1, max: 3 }) }),
          {
            minLength: 1,
            maxLength: 40,
          },
        ),
        async (dims, requests) => {
          const now = START;
          const sets = dims.map(({ kind, limit }) => [windowKinds[kind]!(limit)]);
          const compound = createCompoundLimiter({ dimensions: limiters(sets, () => now, false) });
          // All at once: each dimension's store sees the others' charges and give-backs interleaved.
          const decisions = await Promise.all(
            requests.map((r) => compound.limit(Object.fromEntries(sets.map((_, d) => [NAMES[d]!, r.keys[d]!])), { cost: r.cost })),
          );
          for (let d = 0; d < sets.length; d++) {
            for (const key of ["a", "b"]) {
              const admitted = requests.reduce((n, r, i) => n + (decisions[i]!.allowed && r.keys[d] === key ? r.cost : 0), 0);
              // The bound: never more than the limit.
              expect(admitted).toBeLessThanOrEqual(dims[d]!.limit);
              const remaining = (await compound.dimensions[NAMES[d]!]!.peek(key)).remaining;
              if (dims[d]!.kind === 3) {
                // A bucket gives back into a charge only while no grant came since
                // (docs/refunds.md): a refused request's units may stay, never the reverse.
                expect(remaining).toBeLessThanOrEqual(Math.max(0, dims[d]!.limit - admitted));
              } else {
                // Nothing a refusal charged is left: the state holds exactly the admitted units.
                expect(remaining).toBe(Math.max(0, dims[d]!.limit - admitted));
              }
            }
          }
        },
      ),
      { numRuns: 150 },
    );
  });
});
