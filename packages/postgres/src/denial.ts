import { evaluateState, type PolicySet, type StoreResult } from "@floodgate/core/store";
import { WIDTH } from "./sql/algorithms.ts";
import type { CounterKind } from "./sql/counter.ts";

/**
 * A denial of one counter policy from the row it was decided on, as the direct charge statement
 * returns it ([-1, now µs, num1, num2, num3, blocked_until_us]; sql/direct.ts): the figures the
 * reference algorithms give on that state (evaluateState, the memory store's arithmetic), a block
 * in force included. Undefined when they would admit or the reply is not such a row: the store then
 * asks the kind's charge function, which decides on its own.
 */
export function denialFrom(set: PolicySet, kind: CounterKind, reply: readonly unknown[], cost: number): StoreResult | undefined {
  if (reply.length !== 6 || !reply.every((v) => typeof v === "number")) return undefined;
  const [, nowUs, n1, n2, n3, blockedUntilUs] = reply as number[];
  const nowMs = nowUs! / 1000;
  // evaluateState takes ms and reads floor(ms × 1000) µs: it must be the statement's now.
  if (Math.floor(nowMs * 1000) !== nowUs) return undefined;
  const state = {
    v: 1,
    kinds: set.policies[0]!.kind,
    expiresAtUs: Number.MAX_SAFE_INTEGER,
    numbers: [n1!, n2!, n3!].slice(0, WIDTH[kind]), // how many of num1..num3 the kind keeps
    logs: [null],
    blockedUntilUs: blockedUntilUs! > 0 ? blockedUntilUs : undefined,
  };
  const { result } = evaluateState(set, state, cost, nowMs, "consume");
  return result[0] === 0 ? result : undefined;
}
