import { type Algorithm, algorithmOf, FIELDS_PER_POLICY, toMicros } from "../algorithms/algorithm.ts";
import type { PolicySet, StoreResult } from "./store.ts";

/*
 * The state of one key under one policy set as plain data, and the pure function that decides
 * on it: the building block of a store that cannot run code next to its data (a key-value store
 * with compare-and-set or conditional writes). Such a store implements `consume` as read the
 * value and its version → evaluateState → write the new value only if the version is unchanged
 * → on a conflict, start again (docs/writing-a-store.md). Decisions are the memory store's: both
 * run each algorithm's own `apply` and `refund` in the same order.
 */

/**
 * What to evaluate: charge `cost` when every policy admits it, report for a cost of 1, give
 * `cost` back, reserve `cost` (a consume that also records the reservation), or settle one.
 */
export type EvaluateMode = "consume" | "peek" | "refund" | "reserve" | "settle";

/** The reservation a `"reserve"` records (`id`, `ttlMs`) or a `"settle"` settles (`id`, `actual`). */
export interface ReservationArgs {
  /** The reservation's id, from the limiter. */
  readonly id: string;
  /** `"reserve"`: how long it can be settled. */
  readonly ttlMs?: number;
  /** `"settle"`: its true cost (0 cancels it). */
  readonly actual?: number;
}

/** Most reservations one key's state holds: past it, the one expiring first goes (it keeps its estimate charged). */
export const MAX_RESERVATIONS_PER_KEY = 1000;

/**
 * One key's state under one policy set: JSON-serializable (numbers, arrays of numbers and one
 * string), to be stored as it is. Its layout is each algorithm's (the `width` numbers of its
 * state, then its log for the kinds that keep one).
 */
export interface KeyState {
  /** Format version, 1. A value of any other version reads as no state. */
  readonly v: 1;
  /** The policy kinds it was written under, comma-separated: state of another set reads as none. */
  readonly kinds: string;
  /** When the state stops mattering (epoch µs): a store may delete it then (e.g. as a TTL). */
  readonly expiresAtUs: number;
  /** Every policy's numbers, one after the other. */
  readonly numbers: readonly number[];
  /** Per policy: its log of µs timestamps, or `null` for the kinds that keep none. */
  readonly logs: readonly (readonly number[] | null)[];
  /**
   * Outstanding reservations by id: `[expiresAtUs, estimate, ...one mark per policy]`. Absent
   * when there are none. `expiresAtUs` of the state is never before theirs.
   */
  readonly reservations?: { readonly [id: string]: readonly number[] };
}

/** What {@link evaluateState} decided. */
export interface StateEvaluation {
  /** The store result to return (empty for a refund). */
  readonly result: StoreResult;
  /** The key's state after the operation; `undefined` when the key should hold none. */
  readonly state: KeyState | undefined;
  /**
   * Whether the stored value must be replaced by `state` (deleted when `state` is undefined).
   * False when it would be written unchanged, e.g. a denial, or a peek at state that needs no
   * tidying. A peek may have to write: a sliding log drops entries that have left its window.
   */
  readonly changed: boolean;
  /** `state.expiresAtUs` in whole ms, rounded up (0 without state): the TTL a store may set. */
  readonly expiresAtMs: number;
}

const NO_RESULT: StoreResult = /* @__PURE__ */ Object.freeze([]);

/**
 * Evaluates every policy of `set` for one key whose stored value is `stored` (`undefined` when
 * the key has none), at `nowMs`, without side effects. A value that is not a valid
 * {@link KeyState} of this set's kinds (garbage, another format version, another set's state)
 * reads as no state, as the memory store treats state of another set; `consume` and `peek` then
 * ask for it to be deleted (`changed` with no `state`), a refund leaves it alone. A charged
 * `consume` returns the charge's marks after the figures; a `refund` given `marks` (one per
 * policy) gives back only into them, as a store's `refund` does (docs/refunds.md).
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
): StateEvaluation {
  const policies = set.policies;
  const algorithms = policies.map(algorithmOf);
  const kinds = policies.map((p) => p.kind).join(",");
  const now = toMicros(nowMs);
  const read = parse(stored, kinds, algorithms, policies.length);
  const foreign = stored !== undefined && read === undefined;

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

  if (mode === "refund") {
    if (read === undefined) return unchanged(NO_RESULT, undefined);
    let expiry = 0;
    for (let p = 0; p < policies.length; p++) {
      const e = algorithms[p]!.refund(policies[p]!, read.numbers, read.offsets[p]!, read.logs[p], now, cost, marks?.[p]);
      if (e > expiry) expiry = e;
    }
    return written(NO_RESULT, kinds, expiry, read, true);
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
  for (let p = 0; p < policies.length; p++) out.push(algorithms[p]!.mark(policies[p]!, state.numbers, state.offsets[p]!, state.logs[p]));
  if (mode === "reserve") {
    const expiresAtUs = toMicros(nowMs + (reservation?.ttlMs ?? 0));
    state.reservations[reservation?.id ?? ""] = [expiresAtUs, cost, ...out.slice(1 + policies.length * FIELDS_PER_POLICY)];
  }
  return written(out, kinds, expiry, state, true, now);
}

const SETTLED: StoreResult = /* @__PURE__ */ Object.freeze([1]);
const NOT_SETTLED: StoreResult = /* @__PURE__ */ Object.freeze([0]);

/** A state unpacked for the algorithms, with a copy of what was read (to tell whether it changed). */
interface Unpacked {
  readonly numbers: Float64Array;
  readonly offsets: readonly number[];
  readonly logs: (number[] | undefined)[];
  readonly expiresAtUs: number;
  readonly readNumbers: readonly number[];
  readonly readLogs: readonly (readonly number[] | null)[];
  /** Outstanding reservations, changed in place by reserve and settle. */
  readonly reservations: Record<string, number[]>;
}

function layout(algorithms: readonly Algorithm[]): { offsets: number[]; width: number } {
  const offsets: number[] = [];
  let width = 0;
  for (const a of algorithms) {
    offsets.push(width);
    width += a.width;
  }
  return { offsets, width };
}

function blank(algorithms: readonly Algorithm[]): Unpacked {
  const { offsets, width } = layout(algorithms);
  return {
    numbers: new Float64Array(width),
    offsets,
    logs: algorithms.map((a) => (a.keepsLog ? [] : undefined)),
    expiresAtUs: 0,
    readNumbers: [],
    readLogs: [],
    reservations: Object.create(null) as Record<string, number[]>,
  };
}

const isFiniteArray = (v: unknown): v is number[] => Array.isArray(v) && v.every((n) => typeof n === "number" && Number.isFinite(n));

/** The stored value as the algorithms' state, or undefined when it is not a valid state of these kinds. */
function parse(value: unknown, kinds: string, algorithms: readonly Algorithm[], count: number): Unpacked | undefined {
  if (typeof value !== "object" || value === null) return undefined;
  const v = value as Partial<Record<keyof KeyState, unknown>>;
  if (v.v !== 1 || v.kinds !== kinds || typeof v.expiresAtUs !== "number" || !Number.isFinite(v.expiresAtUs)) return undefined;
  const { offsets, width } = layout(algorithms);
  if (!isFiniteArray(v.numbers) || v.numbers.length !== width) return undefined;
  if (!Array.isArray(v.logs) || v.logs.length !== algorithms.length) return undefined;
  const numbers = Float64Array.from(v.numbers);
  const logs: (number[] | undefined)[] = [];
  for (let p = 0; p < algorithms.length; p++) {
    const a = algorithms[p]!;
    const log: unknown = v.logs[p];
    if (a.keepsLog ? !isFiniteArray(log) : log !== null) return undefined;
    const copy = a.keepsLog ? (log as number[]).slice() : undefined;
    if (!a.accepts(numbers, offsets[p]!, copy)) return undefined;
    logs.push(copy);
  }
  // A malformed ledger reads as none: its reservations keep their estimates charged.
  // Null prototypes: an id is data, never an inherited property.
  const reservations: Record<string, number[]> = Object.create(null);
  const ledger: unknown = v.reservations;
  if (typeof ledger === "object" && ledger !== null && !Array.isArray(ledger)) {
    for (const [id, record] of Object.entries(ledger)) {
      if (isFiniteArray(record) && record.length === 2 + count) reservations[id] = record.slice();
    }
  }
  return {
    numbers,
    offsets,
    logs,
    expiresAtUs: v.expiresAtUs,
    readNumbers: v.numbers,
    readLogs: v.logs as (number[] | null)[],
    reservations,
  };
}

function differs(s: Unpacked): boolean {
  for (let k = 0; k < s.numbers.length; k++) if (s.numbers[k] !== s.readNumbers[k]) return true;
  for (let p = 0; p < s.logs.length; p++) {
    const log = s.logs[p];
    const before = s.readLogs[p];
    if (log === undefined || before === null || before === undefined) continue;
    if (log.length !== before.length) return true;
    for (let k = 0; k < log.length; k++) if (log[k] !== before[k]) return true;
  }
  return false;
}

function written(result: StoreResult, kinds: string, expiresAtUs: number, s: Unpacked, changed: boolean, now?: number): StateEvaluation {
  const numbers = Array.from(s.numbers);
  // A log's reference is the memory store's; here the log sits beside the numbers.
  s.logs.forEach((log, p) => {
    if (log !== undefined) numbers[s.offsets[p]!] = 0;
  });
  const state: Mutable<KeyState> = { v: 1, kinds, expiresAtUs, numbers, logs: s.logs.map((log) => (log === undefined ? null : log)) };
  // Reservations: the expired ones go, the earliest-expiring beyond the bound; the state lasts as long as the latest.
  let ids = Object.keys(s.reservations);
  if (now !== undefined) ids = ids.filter((id) => s.reservations[id]![0]! > now);
  if (ids.length > MAX_RESERVATIONS_PER_KEY) {
    ids = ids.sort((a, b) => s.reservations[b]![0]! - s.reservations[a]![0]!).slice(0, MAX_RESERVATIONS_PER_KEY);
  }
  if (ids.length > 0) {
    const kept: Record<string, number[]> = Object.create(null);
    for (const id of ids) {
      kept[id] = s.reservations[id]!;
      if (kept[id]![0]! > state.expiresAtUs) state.expiresAtUs = kept[id]![0]!;
    }
    state.reservations = kept;
  }
  return { result, state, changed, expiresAtMs: Math.ceil(state.expiresAtUs / 1000) };
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

function unchanged(result: StoreResult, state: KeyState | undefined): StateEvaluation {
  return { result, state, changed: false, expiresAtMs: 0 };
}
