import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { createRateLimiter, fixedWindow, type Policy, slidingLog, slidingWindow, tokenBucket } from "../../packages/core/src/index.ts";
import { example, KINDS } from "../support/kinds.ts";
import { MultiModel } from "./models.ts";

const START = 1_767_225_600_000; // 2026-01-01T00:00:00Z, a multiple of every window below

/** A policy of every registered kind: `limit` per window (a bucket of `limit` refilled over the window). */
const policyArb: fc.Arbitrary<Policy> = fc.oneof(
  fc.record({ kind: fc.constantFrom(...KINDS), limit: fc.integer({ min: 1, max: 8 }), window: fc.integer({ min: 5, max: 400 }) })
    .map(({ kind, limit, window }) => example(kind, limit, window)),
  // Token buckets at refill rates whose µs per token is rounded (100 / 60: 600,000 µs; 7: 142,857 µs).
  fc.record({
    capacity: fc.integer({ min: 1, max: 8 }),
    refillRate: fc.constantFrom(1, 2.5, 3, 10, 100 / 60, 7, 40),
  }).map((o) => tokenBucket(o)),
);

/** Distinct names so several policies of one kind can share a limiter. */
const policySetArb = fc.array(policyArb, { minLength: 1, maxLength: 3 }).map((ps) =>
  ps.map((p, i) => Object.freeze({ ...p, name: `${p.name}#${i}` }))
);

const stepArb = fc.record({
  dt: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 50 }), fc.integer({ min: 0, max: 1500 })),
  key: fc.constantFrom("a", "b", "c"),
  cost: fc.oneof(fc.constant(1), fc.integer({ min: 1, max: 4 })),
});

describe("engine agrees with the reference models, decision for decision", () => {
  it("on random traces of time steps, keys, costs and policy sets", async () => {
    await fc.assert(
      fc.asyncProperty(policySetArb, fc.array(stepArb, { minLength: 1, maxLength: 60 }), async (policies, steps) => {
        let now = START;
        const limiter = createRateLimiter({ policy: policies, clock: () => now });
        const models = new Map<string, MultiModel>();
        for (const step of steps) {
          now += step.dt;
          const model = models.get(step.key) ?? new MultiModel(policies);
          models.set(step.key, model);
          const expected = model.limit(now, step.cost);
          const decision = await limiter.limit(step.key, { cost: step.cost });
          expect(decision.allowed).toBe(expected.allowed);
          expect(decision.retryAfterMs).toBe(expected.retryAfterMs);
          expect(decision.policies.map((p) => p.remaining)).toEqual(expected.remaining);
        }
      }),
      { numRuns: 300 },
    );
  });

  it("peek reports the model's figures and charges nothing", async () => {
    await fc.assert(
      fc.asyncProperty(policySetArb, fc.array(stepArb, { minLength: 1, maxLength: 40 }), async (policies, steps) => {
        let now = START;
        const limiter = createRateLimiter({ policy: policies, clock: () => now });
        const model = new MultiModel(policies);
        for (const step of steps) {
          now += step.dt;
          const peeked = await limiter.peek("k");
          expect(peeked.allowed).toBe(model.fits(now, 1));
          expect(peeked.retryAfterMs).toBe(peeked.allowed ? 0 : model.retryAfterMs(now, 1));
          expect(peeked.policies.map((p) => p.remaining)).toEqual(model.models.map((m) => m.remaining(now)));
          const expected = model.limit(now, step.cost);
          expect((await limiter.limit("k", { cost: step.cost })).allowed).toBe(expected.allowed);
        }
      }),
      { numRuns: 150 },
    );
  });
});

/** Admitted (time, cost) pairs from a dense random trace on one key. */
async function admissions(policy: Policy, steps: { dt: number; cost: number }[]): Promise<[number, number][]> {
  let now = START;
  const limiter = createRateLimiter({ policy, clock: () => now });
  const admitted: [number, number][] = [];
  for (const step of steps) {
    now += step.dt;
    if ((await limiter.limit("k", { cost: step.cost })).allowed) admitted.push([now, step.cost]);
  }
  return admitted;
}

const denseSteps = fc.array(
  fc.record({ dt: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 30 })), cost: fc.integer({ min: 1, max: 3 }) }),
  { minLength: 20, maxLength: 200 },
);

const sumWhere = (admitted: [number, number][], keep: (t: number) => boolean): number =>
  admitted.reduce((sum, [t, c]) => (keep(t) ? sum + c : sum), 0);

describe("invariants hold on dense random traces", () => {
  it("fixed window: at most `limit` per aligned window", async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 10 }), fc.integer({ min: 10, max: 300 }), denseSteps, async (limit, window, steps) => {
        const admitted = await admissions(fixedWindow({ limit, window }), steps);
        for (const [t] of admitted) {
          const index = Math.floor(t / window);
          expect(sumWhere(admitted, (u) => Math.floor(u / window) === index)).toBeLessThanOrEqual(limit);
        }
      }),
    );
  });

  it("sliding log: at most `limit` in any window-long interval", async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 10 }), fc.integer({ min: 10, max: 300 }), denseSteps, async (limit, window, steps) => {
        const admitted = await admissions(slidingLog({ limit, window }), steps);
        for (const [t] of admitted) {
          expect(sumWhere(admitted, (u) => u > t - window && u <= t)).toBeLessThanOrEqual(limit);
        }
      }),
    );
  });

  it("sliding-window counter: at most `limit` per aligned window and under 2 × limit in any window-long interval", async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 10 }), fc.integer({ min: 10, max: 300 }), denseSteps, async (limit, window, steps) => {
        const admitted = await admissions(slidingWindow({ limit, window }), steps);
        for (const [t] of admitted) {
          const index = Math.floor(t / window);
          expect(sumWhere(admitted, (u) => Math.floor(u / window) === index)).toBeLessThanOrEqual(limit);
          expect(sumWhere(admitted, (u) => u > t - window && u <= t)).toBeLessThan(2 * limit);
        }
      }),
    );
  });

  it("token bucket: at most capacity + refillRate × Δt over any interval", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 10 }),
        fc.constantFrom(1, 3, 10, 100 / 60, 50),
        denseSteps,
        async (capacity, refillRate, steps) => {
          const policy = tokenBucket({ capacity, refillRate });
          const admitted = await admissions(policy, steps);
          for (const [a] of admitted) {
            for (const [b] of admitted) {
              if (b < a) continue;
              const earned = ((b - a) * 1000) / Math.round(policy.intervalMs * 1000);
              expect(sumWhere(admitted, (u) => u >= a && u <= b)).toBeLessThanOrEqual(capacity + earned + 1e-9);
            }
          }
        },
      ),
    );
  });

  it("several policies: a denial charges no policy", async () => {
    await fc.assert(
      fc.asyncProperty(policySetArb, denseSteps, async (policies, steps) => {
        let now = START;
        const combined = createRateLimiter({ policy: policies, clock: () => now });
        // Each policy alone, charged only when the combined limiter admitted: must agree with it.
        const alone = policies.map((policy) => createRateLimiter({ policy, clock: () => now }));
        for (const step of steps) {
          now += step.dt;
          const before = await Promise.all(alone.map((l) => l.peek("k")));
          const decision = await combined.limit("k", { cost: step.cost });
          decision.policies.forEach((p, i) => {
            if (!decision.allowed) expect(p.remaining).toBe(before[i]!.remaining);
          });
          if (decision.allowed) await Promise.all(alone.map((l) => l.limit("k", { cost: step.cost })));
        }
      }),
    );
  });
});
