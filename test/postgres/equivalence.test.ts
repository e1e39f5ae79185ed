/**
 * Equivalence: random traces replayed with an injected clock give identical store results on the
 * memory store (the specification, packages/core/src/algorithms/) and on the PostgreSQL store
 * (`clock: "local"`), over both clients: consumes, peeks, refunds (into the last charge's marks
 * or the current state), reservations and their settlement, penalties, blocks and resets. Leased
 * calls (returns, requests, new leases, retried ids) are compared with evaluateState's lease mode,
 * through the example compare-and-set store.
 */
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LEASE_RECORD_GRACE_MS } from "../../packages/core/src/stores/index.ts";
import {
  fixedWindow,
  type LeaseRequest,
  memoryStore,
  type PolicySet,
  type RateLimitStore,
  tokenBucket,
} from "../../packages/core/src/index.ts";
import { example, SQL_RATE_KINDS as KINDS } from "../support/kinds.ts";
import { uniquePrefix } from "../stores/store-contract.ts";
import { kvStore } from "../../examples/custom-store/kv-store.ts";
import { VersionedMap } from "../../examples/custom-store/versioned-map.ts";
import { GRAIN_MS, policySets } from "../redis/policy-arbitraries.ts";
import { postgresUnavailable } from "../support/postgres-server.ts";
import { CLIENTS, type PostgresHarness, postgresHarness } from "./harness.ts";

const T0 = 1_700_000_000_000;
const unavailable = await postgresUnavailable();
if (unavailable !== undefined) console.log(unavailable);

type Op =
  | { kind: "consume" | "reserve"; key: string; cost: number; dt: number }
  | { kind: "peek" | "reset" | "settle"; key: string; dt: number; actual?: number }
  | { kind: "refund"; key: string; cost: number; dt: number; marked: boolean }
  | { kind: "penalty" | "block"; key: string; amount: number; dt: number };

const keyArb = fc.constantFrom("a", "b", "user:1");
function opArb(backwards: boolean): fc.Arbitrary<Op> {
  const dt = (backwards ? fc.integer({ min: -20, max: 30 }) : fc.integer({ min: 0, max: 30 })).map((n) => n * GRAIN_MS);
  return fc.oneof(
    fc.record({ kind: fc.constant("consume" as const), key: keyArb, cost: fc.integer({ min: 1, max: 4 }), dt }),
    fc.record({ kind: fc.constant("consume" as const), key: keyArb, cost: fc.constant(1), dt }),
    fc.record({ kind: fc.constant("peek" as const), key: keyArb, dt }),
    fc.record({ kind: fc.constant("reset" as const), key: keyArb, dt }),
    fc.record({ kind: fc.constant("refund" as const), key: keyArb, cost: fc.integer({ min: 1, max: 3 }), dt, marked: fc.boolean() }),
    fc.record({ kind: fc.constant("reserve" as const), key: keyArb, cost: fc.integer({ min: 1, max: 3 }), dt }),
    fc.record({ kind: fc.constant("settle" as const), key: keyArb, dt, actual: fc.integer({ min: 0, max: 6 }) }),
    fc.record({ kind: fc.constant("penalty" as const), key: keyArb, amount: fc.integer({ min: 1, max: 5 }), dt }),
    fc.record({ kind: fc.constant("block" as const), key: keyArb, amount: fc.constantFrom(1000, 5000, 30_000), dt }),
  );
}

/** Both stores through the same operations; every answer compared. */
async function replay(reference: RateLimitStore, subject: RateLimitStore, set: PolicySet, start: number, ops: Op[]): Promise<void> {
  let now = start;
  let reservation = 0;
  const marks = new Map<string, number[]>();
  const reserved = new Map<string, string>();
  for (const [step, op] of ops.entries()) {
    now += op.dt;
    const where = `step ${step} (${op.kind} ${op.key} at +${now - start} ms)`;
    const both = async <T>(call: (s: RateLimitStore) => T | Promise<T>): Promise<[T, T]> => [await call(reference), await call(subject)];
    if (op.kind === "consume" || op.kind === "peek" || op.kind === "reserve") {
      const id = `r${++reservation}`;
      const { kind, key } = op;
      const cost = "cost" in op ? op.cost : 1;
      const [expected, actual] = await both((s) =>
        kind === "consume"
          ? s.consume(set, key, cost, now)
          : kind === "peek"
          ? s.peek(set, key, now)
          : s.reserve!(set, key, cost, now, id, 20_000)
      );
      expect([...actual], where).toEqual([...expected]);
      if (op.kind !== "peek" && expected[0] === 1) marks.set(op.key, expected.slice(1 + set.policies.length * 4));
      if (op.kind === "reserve" && expected[0] === 1) reserved.set(op.key, id);
    } else if (op.kind === "refund") {
      const m = op.marked ? marks.get(op.key) : undefined;
      await both((s) => s.refund(set, op.key, op.cost, now, m));
    } else if (op.kind === "settle") {
      const id = reserved.get(op.key) ?? "none";
      const [expected, actual] = await both((s) => s.settle!(set, op.key, id, op.actual ?? 0, now));
      expect(actual, where).toBe(expected);
    } else if (op.kind === "penalty") await both((s) => s.penalty!(set, op.key, op.amount, now));
    else if (op.kind === "block") await both((s) => s.block!(set, op.key, op.amount, now));
    else await both((s) => s.reset(set, op.key));
  }
}

const policiesArb = policySets({
  kinds: KINDS, // the kinds the SQL stores decide
  maxLimit: 8,
  windows: [1, 3, 10, 20, 50, 600],
  rates: [1, 0.5, 0.25, 0.2, 0.1],
  minPolicies: 1,
  maxPolicies: 3,
});

/** A leased call: a request (0: none) wanting some extra units, returning earlier leases. */
interface LeaseOp {
  cost: number;
  want: number;
  dt: number;
  lifeMs: number;
  returns: number;
  retry: boolean;
}
const leaseOpArb: fc.Arbitrary<LeaseOp> = fc.record({
  cost: fc.integer({ min: 0, max: 3 }),
  want: fc.integer({ min: 0, max: 40 }),
  dt: fc.integer({ min: 0, max: 5000 }),
  lifeMs: fc.constantFrom(200, 1000, 3000),
  returns: fc.integer({ min: 0, max: 2 }),
  retry: fc.boolean(),
});
const leasedSetArb = fc.array(
  fc.record({ kind: fc.constantFrom("token-bucket", "fixed-window", "sliding-window" as const), limit: fc.integer({ min: 20, max: 200 }) })
    .map(({ kind, limit }) => example(kind, limit, 60_000)),
  { minLength: 1, maxLength: 2 },
).map((ps) => ps.map((p, i) => Object.freeze({ ...p, name: `p${i}` })));

describe.skipIf(unavailable !== undefined).each(CLIENTS)("equivalence with the specification: postgresStore (%s)", (client) => {
  let h: PostgresHarness;
  beforeAll(async () => {
    h = await postgresHarness(client);
  });
  afterAll(async () => {
    await h?.close();
  });

  const check = (backwards: boolean, numRuns: number) =>
    fc.assert(
      fc.asyncProperty(
        policiesArb,
        fc.integer({ min: 0, max: 600 }).map((n) => T0 + n * GRAIN_MS),
        fc.array(opArb(backwards), { minLength: 1, maxLength: 40 }),
        fc.boolean(),
        async (policies, start, ops, sweeping) => {
          const set: PolicySet = Object.freeze({ prefix: uniquePrefix(), policies: Object.freeze(policies) });
          // Forward time, in half the runs: a sweep on every charging call, which must change no
          // decision (such a call goes through the consume function, not a charge function).
          await replay(memoryStore(), h.store("local", { sweepEvery: !backwards && sweeping ? 1 : 0 }), set, start, ops);
        },
      ),
      { numRuns },
    );

  it("identical results on forward-moving time (every operation; sweeps on every call in half the runs)", async () => {
    await check(false, 120);
  }, 240_000);

  it("identical results when the clock also steps backwards", async () => {
    await check(true, 80);
  }, 240_000);

  it("traces the random ones found: a peek that tidies a log, then the clock back; a settle after a reset", async () => {
    const log = (limit: number) => Object.freeze({ ...example("sliding-log", limit, 1000), name: `p${limit}` });
    const traces: [PolicySet["policies"], Op[]][] = [
      [[log(1), log(2)], [
        { kind: "reserve", key: "b", cost: 1, dt: 0 },
        { kind: "peek", key: "b", dt: 1000 },
        { kind: "consume", key: "b", cost: 1, dt: -1000 },
      ]],
      [[tokenBucket({ capacity: 1, refillRate: 1 })], [
        { kind: "reserve", key: "a", cost: 1, dt: 0 },
        { kind: "reset", key: "a", dt: 0 },
        { kind: "settle", key: "a", dt: 0, actual: 0 },
        { kind: "consume", key: "a", cost: 1, dt: 0 },
      ]],
    ];
    for (const [policies, ops] of traces) {
      const set: PolicySet = Object.freeze({ prefix: uniquePrefix(), policies: Object.freeze(policies) });
      await replay(memoryStore(), h.store("local"), set, T0, ops);
    }
  });

  it("identical results at microsecond times on one forward-moving trace", async () => {
    const policies = [
      ...KINDS.map((kind, i) => example(kind, 5 + i, 60_000)),
      tokenBucket({ capacity: 5, refillRate: 3 }), // 333,333 µs per token: rounded
      fixedWindow({ limit: 9, window: "1h" }),
    ].map((p, i) => Object.freeze({ ...p, name: `q${i}` }));
    for (const one of [...policies.map((p) => [p]), policies]) {
      const set: PolicySet = Object.freeze({ prefix: uniquePrefix(), policies: Object.freeze(one) });
      const reference = memoryStore();
      const subject = h.store("local");
      let now = T0 + 0.1234;
      for (let i = 0; i < 120; i++) {
        now += ((i * 7919) % 997) * 1.001 + 0.001;
        const cost = 1 + (i % 3);
        expect([...(await subject.consume(set, "z", cost, now))], `step ${i}`).toEqual([...(await reference.consume(set, "z", cost, now))]);
      }
    }
  }, 120_000);

  it("leased calls answer exactly as evaluateState's lease mode (returns, grants, retried ids)", async () => {
    await fc.assert(
      fc.asyncProperty(leasedSetArb, fc.array(leaseOpArb, { minLength: 1, maxLength: 30 }), async (policies, ops) => {
        const set: PolicySet = Object.freeze({ prefix: uniquePrefix(), policies: Object.freeze(policies) });
        const reference = kvStore(new VersionedMap());
        const subject = h.store("local");
        let now = T0 + 12_345;
        // Leases whose record every store still holds: past its end and grace, a store may have
        // dropped it or not yet (Redis expires it in real time, evaluateState when it next writes).
        let granted: { id: string; g: number; until: number }[] = [];
        let serial = 0;
        for (const [step, op] of ops.entries()) {
          now += op.dt;
          granted = granted.filter((l) => l.until > now + 1);
          const returns = granted.splice(0, op.returns).map((l) => ({ id: l.id, unspent: Math.ceil(l.g / 2) }));
          const id = op.retry && granted.length > 0 ? granted[granted.length - 1]!.id : `L${++serial}`;
          const request: LeaseRequest = { cost: op.cost, want: op.want, lifeMs: op.lifeMs, minLifeMs: 50, id, returns };
          const expected = await reference.lease!(set, "k", request, now);
          const actual = await subject.lease!(set, "k", request, now);
          expect([...actual], `step ${step}`).toEqual([...expected]);
          const g = expected[expected.length - 3]!;
          const until = now + expected[expected.length - 2]! / 1000 + LEASE_RECORD_GRACE_MS;
          if (g > 0 && !granted.some((l) => l.id === id)) granted.push({ id, g, until });
        }
      }),
      { numRuns: 80 },
    );
  }, 240_000);
});
