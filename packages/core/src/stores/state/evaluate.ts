import { algorithmOf, FIELDS_PER_POLICY, markOf, toMicros } from "../../algorithms/algorithm.ts";
import type { LeaseRequest, PolicySet, StoreResult } from "../store.ts";
import { blockFor, overrideBlocked, penalize } from "../block.ts";
import type { EvaluateMode, ReservationArgs, StateEvaluation } from "./types.ts";
import { blank, differs, parse, unchanged, written } from "./unpacked.ts";
import { evaluateLease } from "./lease.ts";

/*
 * The state of one key under one policy set as plain data, and the pure function that decides
 * on it: the building block of a store that cannot run code next to its data (a key-value store
 * with compare-and-set or conditional writes). Such a store implements `consume` as read the
 * value and its version → evaluateState → write the new value only if the version is unchanged
 * → on a conflict, start again (docs/writing-a-store.md). Decisions are the memory store's: both
 * run each algorithm's own `apply` and `refund` in the same order.
 */

const NO_RESULT: StoreResult = /* @__PURE__ */ Object.freeze([]);

/**
 * Evaluates every policy of `set` for one key whose stored value is `stored` (`undefined` when
 * the key has none), at `nowMs`, without side effects. A value that is not a valid
 * {@link KeyState} of this set's kinds (garbage, another format version, another set's state)
 * reads as no state, as the memory store treats state of another set; `consume` and `peek` then
 * ask for it to be deleted (`changed` with no `state`), a refund leaves it alone. A charged
 * `consume` returns the charge's marks after the figures; a `refund` given `marks` (one per
 * policy) gives back only into them, as a store's `refund` does (docs/refunds.md). Mode
 * `"lease"` takes the store's {@link LeaseRequest} as `lease` (and ignores `cost`) and answers
 * as a store's `lease` does.
 *
 * @example
 * const { result, state, changed, expiresAtMs } = evaluateState(set, JSON.parse(value), 1, Date.now(), "consume");
 */
export function evaluateState(
  set: PolicySet,
  stored: unknown,
  cost: number,
  nowMs: number,
  mode: EvaluateMode,
  marks?: readonly number[],
  reservation?: ReservationArgs,
  lease?: LeaseRequest,
): StateEvaluation {
  const policies = set.policies;
  const algorithms = policies.map(algorithmOf);
  const kinds = policies.map((p) => p.kind).join(",");
  const now = toMicros(nowMs);
  const read = parse(stored, kinds, algorithms, policies.length);
  const foreign = stored !== undefined && read === undefined;

  if (mode === "lease") {
    if (lease === undefined) throw new TypeError('evaluateState(): mode "lease" takes the LeaseRequest as its eighth argument');
    return evaluateLease(set, algorithms, read ?? blank(algorithms), read === undefined && !foreign, lease, now, kinds);
  }

  if (mode === "settle") {
    // Answers [1] when a record was settled, [0] when there was none (or it had expired).
    const id = reservation?.id ?? "";
    const record = read?.reservations[id];
    if (read === undefined || record === undefined) return unchanged(NOT_SETTLED, undefined);
    delete read.reservations[id];
    if (record[0]! <= now) return written(NOT_SETTLED, kinds, read.expiresAtUs, read, true, now);
    const actual = reservation?.actual ?? 0;
    let expiry = 0;
    for (let p = 0; p < policies.length; p++) {
      const e = algorithms[p]!.settle(policies[p]!, read.numbers, read.offsets[p]!, read.logs[p], now, record[1]!, actual, record[2 + p]!);
      if (e > expiry) expiry = e;
    }
    return written(SETTLED, kinds, expiry, read, true, now);
  }

  if (mode === "refund" || mode === "unblock") {
    if (read === undefined) return unchanged(NO_RESULT, undefined);
    if (mode === "unblock") {
      if (!(read.blockedUntilUs > 0)) return unchanged(NO_RESULT, undefined);
      read.blockedUntilUs = 0;
      return written(NO_RESULT, kinds, read.expiresAtUs, read, true);
    }
    let expiry = 0;
    for (let p = 0; p < policies.length; p++) {
      const e = algorithms[p]!.refund(policies[p]!, read.numbers, read.offsets[p]!, read.logs[p], now, cost, marks?.[p]);
      if (e > expiry) expiry = e;
    }
    // A block outlasts the counters: the state stays until it ends.
    return written(NO_RESULT, kinds, Math.max(expiry, read.blockedUntilUs), read, true);
  }
  if (mode === "penalty" || mode === "block") {
    const state = read ?? blank(algorithms);
    let expiry = state.expiresAtUs;
    if (mode === "block") state.blockedUntilUs = now + cost * 1000;
    else {
      const scratch = [0, 0, 0, 0, 0];
      for (let p = 0; p < policies.length; p++) {
        const e = penalize(algorithms[p]!, policies[p]!, state.numbers, state.offsets[p]!, state.logs[p], now, cost, scratch);
        if (e > expiry) expiry = e;
      }
    }
    return written(NO_RESULT, kinds, Math.max(expiry, state.blockedUntilUs), state, true);
  }

  const charge = mode === "consume" || mode === "reserve";
  if (!charge) cost = 1;
  const state = read ?? blank(algorithms);
  const out = [0];
  for (let p = 0; p < policies.length; p++) out.push(0, 0, 0, 0);
  let allowed = 1;
  for (let p = 0; p < policies.length; p++) {
    const i = 1 + p * FIELDS_PER_POLICY;
    algorithms[p]!.apply(policies[p]!, state.numbers, state.offsets[p]!, state.logs[p], now, cost, out, i, false);
    if (out[i] === 0) allowed = 0;
  }
  out[0] = allowed;
  if (state.blockedUntilUs > now) {
    overrideBlocked(out, policies.length, state.blockedUntilUs, now);
    return written(out, kinds, state.expiresAtUs, state, differs(state));
  }
  const blockMs = allowed === 0 && charge ? blockFor(policies, out) : 0;
  if (blockMs > 0) {
    state.blockedUntilUs = now + blockMs * 1000;
    overrideBlocked(out, policies.length, state.blockedUntilUs, now);
    return written(out, kinds, Math.max(state.expiresAtUs, state.blockedUntilUs), state, true);
  }
  if (allowed === 0 || !charge) {
    if (read === undefined) return { result: out, state: undefined, changed: foreign, expiresAtMs: 0 };
    // Evaluating may tidy the state (a log drops what left the window); the expiry stays.
    return written(out, kinds, read.expiresAtUs, read, differs(read));
  }
  let expiry = 0;
  for (let p = 0; p < policies.length; p++) {
    const e = algorithms[p]!.apply(
      policies[p]!,
      state.numbers,
      state.offsets[p]!,
      state.logs[p],
      now,
      cost,
      out,
      1 + p * FIELDS_PER_POLICY,
      true,
    );
    if (e > expiry) expiry = e;
  }
  for (let p = 0; p < policies.length; p++) out.push(markOf(algorithms[p]!, policies[p]!, state.numbers, state.offsets[p]!, state.logs[p]));
  if (mode === "reserve") {
    const expiresAtUs = toMicros(nowMs + (reservation?.ttlMs ?? 0));
    state.reservations[reservation?.id ?? ""] = [expiresAtUs, cost, ...out.slice(1 + policies.length * FIELDS_PER_POLICY)];
  }
  return written(out, kinds, Math.max(expiry, state.blockedUntilUs), state, true, now);
}

const SETTLED: StoreResult = /* @__PURE__ */ Object.freeze([1]);
const NOT_SETTLED: StoreResult = /* @__PURE__ */ Object.freeze([0]);
