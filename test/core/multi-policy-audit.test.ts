/**
 * Several policies on the memory store against each policy alone: a combined limiter and one
 * single-policy limiter per policy, the single ones charged exactly when the combined one admits,
 * refunded and reset with it, on traces whose clock also steps back. Every policy's figures must
 * be its own limiter's, and the top-level figures the binding policy's.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  createRateLimiter,
  type Decision,
  fixedWindow,
  type Policy,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from "../../packages/core/src/index.ts";

const START = 1_767_225_600_000;
const windowPolicy = (make: typeof fixedWindow) =>
  fc.record({ limit: fc.integer({ min: 1, max: 6 }), window: fc.constantFrom(5, 50, 400, 1000) }).map((o) => make(o));
const policyArb: fc.Arbitrary<Policy> = fc.oneof(
  fc.record({ capacity: fc.integer({ min: 1, max: 6 }), refillRate: fc.constantFrom(1, 2.5, 10, 40) }).map((o) => tokenBucket(o)),
  windowPolicy(fixedWindow),
  windowPolicy(slidingWindow),
  windowPolicy(slidingLog),
);
const policySetArb = fc.array(policyArb, { minLength: 2, maxLength: 4 }).map((ps) =>
  ps.map((p, i) => Object.freeze({ ...p, name: `${p.name}#${i}` }))
);
const opArb = fc.record({
  kind: fc.constantFrom("limit", "limit", "limit", "limit", "peek", "refund", "reset"),
  cost: fc.integer({ min: 1, max: 7 }),
  dt: fc.oneof(fc.integer({ min: 0, max: 60 }), fc.integer({ min: -80, max: 500 })),
});

function checkBinding(d: Decision): void {
  const candidates = d.allowed ? d.policies : d.policies.filter((p) => !p.allowed);
  const best = d.allowed ? Math.min(...candidates.map((p) => p.remaining)) : Math.max(...candidates.map((p) => p.retryAfterMs));
  const bound = candidates.filter((p) => (d.allowed ? p.remaining : p.retryAfterMs) === best);
  const chosen = d.policies.find((p) => p.policy === d.policy)!;
  expect(bound).toContain(chosen);
  expect(bound[0]).toBe(chosen); // ties: the first in order
  expect([d.limit, d.remaining, d.resetAt, d.retryAfterMs]).toEqual([
    chosen.limit,
    chosen.remaining,
    chosen.resetAt,
    d.allowed ? 0 : chosen.retryAfterMs,
  ]);
  expect(d.allowed).toBe(d.policies.every((p) => p.allowed));
}

describe("several policies on the memory store, each policy against itself alone", () => {
  it("figures, binding policy, refunds, resets and clock steps back", async () => {
    await fc.assert(
      fc.asyncProperty(policySetArb, fc.array(opArb, { minLength: 1, maxLength: 50 }), async (policies, ops) => {
        let now = START;
        const combined = createRateLimiter({ policy: policies, clock: () => now });
        const alone = policies.map((policy) => createRateLimiter({ policy, clock: () => now }));
        for (const [step, op] of ops.entries()) {
          now += op.dt;
          const where = `step ${step}: ${op.kind} cost ${op.cost} at +${now - START}`;
          if (op.kind === "limit") {
            // The combined limiter reads every policy at every call (a sliding log drops entries that
            // left the window ending at the newest time seen): so do the single ones.
            for (const l of alone) await l.peek("k");
            const d = await combined.limit("k", { cost: op.cost });
            checkBinding(d);
            for (const [i, p] of d.policies.entries()) {
              // A policy the combined limiter charged, or one that denied: its own limiter decides alike.
              if (d.allowed || !p.allowed) {
                const own = (await alone[i]!.limit("k", { cost: op.cost })).policies[0]!;
                expect({ ...p, policy: "" }, `${where}, policy ${i}`).toEqual({ ...own, policy: "" });
              }
            }
          } else if (op.kind === "peek") {
            const d = await combined.peek("k");
            checkBinding(d);
            const own = await Promise.all(alone.map((l) => l.peek("k")));
            expect(d.policies.map((p) => ({ ...p, policy: "" })), where).toEqual(own.map((o) => ({ ...o.policies[0]!, policy: "" })));
          } else if (op.kind === "refund") {
            await combined.refund("k", { cost: op.cost });
            for (const l of alone) await l.refund("k", { cost: op.cost });
          } else {
            await combined.reset("k");
            for (const l of alone) await l.reset("k");
          }
        }
      }),
      { numRuns: 400 },
    );
  });
});
