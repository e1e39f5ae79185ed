/**
 * evaluateState, the state layout as plain data, against the memory store: random traces of
 * operations (consumes, peeks, refunds, resets; time steps forward and back; several keys; random
 * policy sets of every registered kind) replayed on both give identical results, step for step.
 * The state store keeps each key's value as JSON text, so the state also survives serialization.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { evaluateState, type KeyState, memoryStore, type Policy, type PolicySet, type StoreResult } from "../../packages/core/src/index.ts";
import { example, KINDS } from "../support/kinds.ts";

const T0 = 1_767_225_600_000;

const policyArb: fc.Arbitrary<Policy> = fc
  .record({ kind: fc.constantFrom(...KINDS), limit: fc.integer({ min: 1, max: 8 }), window: fc.integer({ min: 5, max: 400 }) })
  .map(({ kind, limit, window }) => example(kind, limit, window));
const setArb = fc
  .array(policyArb, { minLength: 1, maxLength: 4 })
  .map((ps): PolicySet =>
    Object.freeze({ prefix: "s:", policies: Object.freeze(ps.map((p, i) => Object.freeze({ ...p, name: `p${i}` }))) })
  );

type Op = { op: "consume" | "peek" | "refund" | "reset"; key: string; cost: number; dt: number };
const opArb: fc.Arbitrary<Op> = fc.record({
  op: fc.constantFrom("consume", "consume", "consume", "peek", "refund", "reset"),
  key: fc.constantFrom("a", "b", "c"),
  cost: fc.integer({ min: 1, max: 5 }),
  // Fractional milliseconds too: the state is kept in µs, as the memory store's.
  dt: fc.oneof(fc.integer({ min: 0, max: 60 }), fc.integer({ min: -100, max: 500 }), fc.double({ min: 0, max: 20, noNaN: true })),
});

/** The smallest store over evaluateState: a Map of JSON text, written when the evaluation says so. */
function stateStore() {
  const values = new Map<string, string>();
  const run = (set: PolicySet, key: string, cost: number, nowMs: number, mode: "consume" | "peek" | "refund") => {
    const raw = values.get(key);
    const e = evaluateState(set, raw === undefined ? undefined : JSON.parse(raw), cost, nowMs, mode);
    if (e.changed) {
      if (e.state === undefined) values.delete(key);
      else values.set(key, JSON.stringify(e.state));
    }
    return e;
  };
  return { values, run };
}

describe("evaluateState decides as the memory store", () => {
  it("on random traces of consumes, peeks, refunds and resets", () => {
    fc.assert(
      fc.property(
        fc.array(setArb, { minLength: 1, maxLength: 2 }),
        fc.array(opArb, { minLength: 1, maxLength: 80 }),
        fc.nat(),
        (sets, ops, pick) => {
          const memory = memoryStore();
          const state = stateStore();
          let now = T0;
          for (const [step, o] of ops.entries()) {
            now += o.dt;
            // Mostly one set; sometimes a second one under the same keys (a reconfigured limiter).
            const set = sets[(pick + step) % 7 === 0 ? sets.length - 1 : 0]!;
            const where = `step ${step}: ${o.op} ${o.key} cost ${o.cost} at +${now - T0} ms`;
            if (o.op === "reset") {
              memory.reset(set, o.key);
              state.values.delete(o.key);
            } else if (o.op === "refund") {
              memory.refund(set, o.key, o.cost, now);
              expect([...state.run(set, o.key, o.cost, now, "refund").result], where).toEqual([]);
            } else {
              // The memory store answers synchronously.
              const expected = (o.op === "consume" ? memory.consume(set, o.key, o.cost, now) : memory.peek(set, o.key, now)) as StoreResult;
              expect([...state.run(set, o.key, o.cost, now, o.op).result], where).toEqual([...expected]);
            }
          }
        },
      ),
      { numRuns: 400 },
    );
  });

  it("reports when the state expires, as a store's TTL", () => {
    const set: PolicySet = { prefix: "", policies: [example("fixed-window", 5, 1000), example("sliding-window", 5, 1000)] };
    const e = evaluateState(set, undefined, 1, T0 + 250, "consume");
    // The sliding counter's state matters until both counted windows have passed.
    expect(e.expiresAtMs).toBe(T0 + 2000);
    expect(e.state!.expiresAtUs).toBe((T0 + 2000) * 1000);
  });

  it("charges nothing and writes nothing for a denial or a peek on a key without state", () => {
    const set: PolicySet = { prefix: "", policies: [example("token-bucket", 2, 1000)] };
    const peek = evaluateState(set, undefined, 1, T0, "peek");
    expect([peek.changed, peek.state, [...peek.result]]).toEqual([false, undefined, [1, 1, 2, Math.ceil(T0), 0]]);
    const tooMuch = evaluateState(set, undefined, 3, T0, "consume");
    expect([tooMuch.changed, tooMuch.state, tooMuch.result[0]]).toEqual([false, undefined, 0]);
    const refund = evaluateState(set, undefined, 1, T0, "refund");
    expect([refund.changed, refund.state]).toEqual([false, undefined]);
  });
});

describe("a stored value that is not this set's state reads as none", () => {
  const sets = KINDS.map((kind): PolicySet => ({ prefix: "", policies: [example(kind, 3, 60_000)] }));
  const fresh = (set: PolicySet) => [...evaluateState(set, undefined, 1, T0, "consume").result];

  it("any JSON value: no crash, the decision of a key without state, and a consume replaces it", () => {
    fc.assert(
      fc.property(fc.constantFrom(...sets), fc.jsonValue(), (set, garbage) => {
        const e = evaluateState(set, garbage, 1, T0, "consume");
        expect([...e.result]).toEqual(fresh(set));
        expect(e.changed).toBe(true);
        expect(e.state!.kinds).toBe(set.policies[0]!.kind);
      }),
      { numRuns: 500 },
    );
  });

  it("well-formed values of the wrong shape: another version, another set's kinds, bad numbers, a log out of order", () => {
    for (const set of sets) {
      const good = evaluateState(set, undefined, 2, T0, "consume").state!;
      const roundTrip = JSON.parse(JSON.stringify(good)) as KeyState;
      // The good state itself is read: one more admitted, then the limit.
      expect(evaluateState(set, roundTrip, 1, T0, "consume").result.slice(0, 3)).toEqual([1, 1, 0]);
      const bad: unknown[] = [
        { ...roundTrip, v: 2 },
        { ...roundTrip, kinds: KINDS.find((k) => k !== set.policies[0]!.kind) },
        { ...roundTrip, numbers: roundTrip.numbers.map(() => -1.5) },
        { ...roundTrip, numbers: [...roundTrip.numbers, 0] },
        { ...roundTrip, numbers: roundTrip.numbers.map(() => "1") },
        { ...roundTrip, logs: [] },
        { ...roundTrip, expiresAtUs: null },
      ];
      for (const value of bad) {
        const e = evaluateState(set, value, 1, T0, "peek");
        expect([...e.result], JSON.stringify(value)).toEqual([...evaluateState(set, undefined, 1, T0, "peek").result]);
        // Peek and consume delete it (as the memory store drops another layout's state); a refund leaves it.
        expect([e.changed, e.state]).toEqual([true, undefined]);
        expect(evaluateState(set, value, 1, T0, "refund").changed).toBe(false);
      }
    }
    const log: PolicySet = { prefix: "", policies: [example("sliding-log", 3, 60_000)] };
    const outOfOrder = { v: 1, kinds: "sliding-log", expiresAtUs: 0, numbers: [0, 0, 2], logs: [[T0 * 1000 + 5, T0 * 1000]] };
    expect(evaluateState(log, outOfOrder, 1, T0, "consume").result.slice(0, 3)).toEqual([1, 1, 2]);
    const countBeyondLog = { v: 1, kinds: "sliding-log", expiresAtUs: 0, numbers: [0, 0, 3], logs: [[T0 * 1000]] };
    expect(evaluateState(log, countBeyondLog, 1, T0, "consume").result.slice(0, 3)).toEqual([1, 1, 2]);
  });
});
