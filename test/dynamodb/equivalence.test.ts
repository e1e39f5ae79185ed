/**
 * Equivalence: random traces (time steps, identifiers, costs, policy sets, operations) replayed
 * with an injected clock give identical store results on the memory store (the specification)
 * and on the DynamoDB store over a real DynamoDB-compatible server, with refunds into the
 * charges' marks, on time moving forward and on a clock that also steps backwards.
 */
import fc from "fast-check";
import { createTable, dynamoDBStore } from "@floodgate/dynamodb";
import { memoryStore, type PolicySet, type RateLimitStore } from "@floodgate/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { uniquePrefix } from "../stores/store-contract.ts";
import { GRAIN_MS, policySets } from "../redis/policy-arbitraries.ts";
import { type Dynalite, startDynalite } from "./dynalite.ts";

const T0 = 1_700_000_000_000;
const TABLE = "equivalence";
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
  | { kind: "refund"; key: string; cost: number; dt: number; marked: boolean }
  | { kind: "reset"; key: string; dt: number };

const keyArb = fc.constantFrom("a", "b", "user:1");
function opArb(backwards: boolean): fc.Arbitrary<Op> {
  const dt = (backwards ? fc.integer({ min: -20, max: 30 }) : fc.integer({ min: 0, max: 30 })).map((n) => n * GRAIN_MS);
  return fc.oneof(
    fc.record({ kind: fc.constant("consume" as const), key: keyArb, cost: fc.integer({ min: 1, max: 4 }), dt }),
    fc.record({ kind: fc.constant("consume" as const), key: keyArb, cost: fc.constant(1), dt }),
    fc.record({ kind: fc.constant("peek" as const), key: keyArb, dt }),
    fc.record({ kind: fc.constant("reset" as const), key: keyArb, dt }),
    fc.record({ kind: fc.constant("refund" as const), key: keyArb, cost: fc.integer({ min: 1, max: 3 }), dt, marked: fc.boolean() }),
  );
}

async function replay(reference: RateLimitStore, subject: RateLimitStore, set: PolicySet, start: number, ops: Op[]): Promise<void> {
  let now = start;
  // The marks of each key's last admission, for refunds into that charge.
  const marks = new Map<string, number[]>();
  for (const [step, op] of ops.entries()) {
    now += op.dt;
    const where = `step ${step} (${op.kind} ${op.key} at +${now - start} ms)`;
    if (op.kind === "consume" || op.kind === "peek") {
      const expected = op.kind === "consume" ? await reference.consume(set, op.key, op.cost, now) : await reference.peek(set, op.key, now);
      const actual = op.kind === "consume" ? await subject.consume(set, op.key, op.cost, now) : await subject.peek(set, op.key, now);
      expect([...actual], where).toEqual([...expected]);
      if (op.kind === "consume" && expected[0] === 1) marks.set(op.key, [...expected.slice(1 + set.policies.length * 4)]);
    } else if (op.kind === "refund") {
      const charge = op.marked ? marks.get(op.key) : undefined;
      await reference.refund(set, op.key, op.cost, now, charge);
      await subject.refund(set, op.key, op.cost, now, charge);
    } else {
      await reference.reset(set, op.key);
      await subject.reset(set, op.key);
    }
  }
}

describe("equivalence with the memory store: DynamoDB (dynalite)", () => {
  let server: Dynalite;
  beforeAll(async () => {
    server = await startDynalite();
    await createTable(server.client(), { table: TABLE });
  });
  afterAll(async () => {
    await server?.stop();
  });

  const check = (backwards: boolean, numRuns: number) =>
    fc.assert(
      fc.asyncProperty(
        policiesArb,
        fc.integer({ min: 0, max: 600 }).map((n) => T0 + n * GRAIN_MS),
        fc.array(opArb(backwards), { minLength: 1, maxLength: 40 }),
        async (policies, start, ops) => {
          const set: PolicySet = Object.freeze({ prefix: uniquePrefix(), policies: Object.freeze(policies) });
          const subject = dynamoDBStore({ client: server.client(), table: TABLE });
          await replay(memoryStore(), subject, set, start, ops);
        },
      ),
      { numRuns },
    );

  it("identical results on forward-moving time, with refunds (into marks and not) and resets", async () => {
    await check(false, 150);
  }, 180_000);

  it("identical results when the clock also steps backwards", async () => {
    await check(true, 100);
  }, 180_000);
});
