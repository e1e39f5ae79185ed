/**
 * Equivalence with the reference: random traces (time steps, identifiers, costs, policy sets,
 * consume/peek/refund/reset) replayed with an injected clock give the memory store's results
 * (the specification, src/algorithms/) on the store under test. For stores on the caller's
 * clock; times, windows and token intervals are whole seconds (test/redis/policy-arbitraries.ts).
 * Runs under vitest and under Deno (through test/portable/vitest-on-deno.ts).
 */
import fc from "fast-check";
import { expect, it } from "vitest";
import { memoryStore, type PolicySet, type RateLimitStore } from "../../packages/core/src/index.ts";
import { GRAIN_MS, policySets } from "../redis/policy-arbitraries.ts";
import { uniquePrefix } from "./store-contract.ts";

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
function opArb(backwards: boolean): fc.Arbitrary<Op> {
  const dt = (backwards ? fc.integer({ min: -20, max: 30 }) : fc.integer({ min: 0, max: 30 })).map((n) => n * GRAIN_MS);
  return fc.oneof(
    fc.record({ kind: fc.constant("consume" as const), key: keyArb, cost: fc.integer({ min: 1, max: 4 }), dt }),
    fc.record({ kind: fc.constant("consume" as const), key: keyArb, cost: fc.constant(1), dt }),
    fc.record({ kind: fc.constant("peek" as const), key: keyArb, dt }),
    fc.record({ kind: fc.constant("reset" as const), key: keyArb, dt }),
    fc.record({ kind: fc.constant("refund" as const), key: keyArb, cost: fc.integer({ min: 1, max: 3 }), dt }),
  );
}

async function replay(subject: RateLimitStore, set: PolicySet, start: number, ops: Op[]): Promise<void> {
  const reference = memoryStore();
  let now = start;
  for (const [step, op] of ops.entries()) {
    now += op.dt;
    const where = `step ${step} (${op.kind} ${op.key} at +${now - start} ms)`;
    if (op.kind === "consume" || op.kind === "peek") {
      const expected = op.kind === "consume" ? await reference.consume(set, op.key, op.cost, now) : await reference.peek(set, op.key, now);
      const actual = op.kind === "consume" ? await subject.consume(set, op.key, op.cost, now) : await subject.peek(set, op.key, now);
      expect([...actual], where).toEqual([...expected]);
    } else if (op.kind === "refund") {
      await reference.refund(set, op.key, op.cost, now);
      await subject.refund(set, op.key, op.cost, now);
    } else {
      await reference.reset(set, op.key);
      await subject.reset(set, op.key);
    }
  }
}

/** Registers the trace tests for the store `subject()` returns (on the caller's clock), `runs` traces each. */
export function equivalenceTraces(subject: () => RateLimitStore, runs = { forward: 60, backwards: 40 }): void {
  const check = (backwards: boolean, numRuns: number) =>
    fc.assert(
      fc.asyncProperty(
        policiesArb,
        fc.integer({ min: 0, max: 600 }).map((n) => T0 + n * GRAIN_MS),
        fc.array(opArb(backwards), { minLength: 1, maxLength: 40 }),
        async (policies, start, ops) => {
          const set: PolicySet = Object.freeze({ prefix: uniquePrefix(), policies: Object.freeze(policies) });
          await replay(subject(), set, start, ops);
        },
      ),
      { numRuns },
    );
  it("traces: the memory store's results on forward-moving time, with refunds and resets", async () => {
    await check(false, runs.forward);
  }, 300_000);
  it("traces: the memory store's results when the clock also steps backwards", async () => {
    await check(true, runs.backwards);
  }, 300_000);
}
