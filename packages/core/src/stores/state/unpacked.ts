import type { Algorithm } from "../../algorithms/algorithm.ts";
import type { StoreResult } from "../store.ts";
import { type KeyState, LEASE_RECORD_GRACE_MS, MAX_RESERVATIONS_PER_KEY, type StateEvaluation } from "./types.ts";

/*
 * A stored state unpacked for the algorithms (numbers in a Float64Array, logs as arrays), and
 * packed again as a {@link KeyState} after an operation.
 */

/** A state unpacked for the algorithms, with a copy of what was read (to tell whether it changed). */
export interface Unpacked {
  readonly numbers: Float64Array;
  readonly offsets: readonly number[];
  readonly logs: (number[] | undefined)[];
  readonly expiresAtUs: number;
  /** When the block ends, µs (0: none). */
  blockedUntilUs: number;
  readonly readNumbers: readonly number[];
  readonly readLogs: readonly (readonly number[] | null)[];
  /** Outstanding reservations, changed in place by reserve and settle. */
  readonly reservations: Record<string, number[]>;
  /** Leases not yet returned, changed in place by lease calls. */
  readonly leases: Record<string, number[]>;
}

export function layout(algorithms: readonly Algorithm[]): { offsets: number[]; width: number } {
  const offsets: number[] = [];
  let width = 0;
  for (const a of algorithms) {
    offsets.push(width);
    width += a.width;
  }
  return { offsets, width };
}

export function blank(algorithms: readonly Algorithm[]): Unpacked {
  const { offsets, width } = layout(algorithms);
  return {
    numbers: new Float64Array(width),
    offsets,
    logs: algorithms.map((a) => (a.keepsLog ? [] : undefined)),
    expiresAtUs: 0,
    blockedUntilUs: 0,
    readNumbers: [],
    readLogs: [],
    reservations: Object.create(null) as Record<string, number[]>,
    leases: Object.create(null) as Record<string, number[]>,
  };
}

const isFiniteArray = (v: unknown): v is number[] => Array.isArray(v) && v.every((n) => typeof n === "number" && Number.isFinite(n));

/** The stored value as the algorithms' state, or undefined when it is not a valid state of these kinds. */
export function parse(value: unknown, kinds: string, algorithms: readonly Algorithm[], count: number): Unpacked | undefined {
  if (typeof value !== "object" || value === null) return undefined;
  const v = value as Partial<Record<keyof KeyState, unknown>>;
  if (v.v !== 1 || v.kinds !== kinds || typeof v.expiresAtUs !== "number" || !Number.isFinite(v.expiresAtUs)) return undefined;
  const { offsets, width } = layout(algorithms);
  if (!isFiniteArray(v.numbers) || v.numbers.length !== width) return undefined;
  if (!Array.isArray(v.logs) || v.logs.length !== algorithms.length) return undefined;
  const blockedUntilUs = v.blockedUntilUs ?? 0;
  if (typeof blockedUntilUs !== "number" || !Number.isFinite(blockedUntilUs)) return undefined;
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
  const leases: Record<string, number[]> = Object.create(null);
  const granted: unknown = v.leases;
  if (typeof granted === "object" && granted !== null && !Array.isArray(granted)) {
    for (const [id, record] of Object.entries(granted)) {
      if (isFiniteArray(record) && record.length === leaseReplyLength(count)) leases[id] = record.slice();
    }
  }
  return {
    numbers,
    offsets,
    logs,
    expiresAtUs: v.expiresAtUs,
    blockedUntilUs,
    readNumbers: v.numbers,
    readLogs: v.logs as (number[] | null)[],
    reservations,
    leases,
  };
}

export function differs(s: Unpacked): boolean {
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

export function written(
  result: StoreResult,
  kinds: string,
  expiresAtUs: number,
  s: Unpacked,
  changed: boolean,
  now?: number,
): StateEvaluation {
  const numbers = Array.from(s.numbers);
  // A log's reference is the memory store's; here the log sits beside the numbers.
  s.logs.forEach((log, p) => {
    if (log !== undefined) numbers[s.offsets[p]!] = 0;
  });
  const state: Mutable<KeyState> = { v: 1, kinds, expiresAtUs, numbers, logs: s.logs.map((log) => (log === undefined ? null : log)) };
  if (s.blockedUntilUs > 0) state.blockedUntilUs = s.blockedUntilUs;
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
  // Leases: kept until their grace after the end has passed; the state lasts as long as they do.
  const leaseIds = Object.keys(s.leases);
  if (leaseIds.length > 0) {
    const kept: Record<string, number[]> = Object.create(null);
    const endAt = leaseReplyLength(s.logs.length) - 2;
    for (const id of leaseIds) {
      const until = s.leases[id]![endAt]! + LEASE_RECORD_GRACE_MS * 1000;
      if (now !== undefined && until <= now) continue;
      kept[id] = s.leases[id]!;
      if (until > state.expiresAtUs) state.expiresAtUs = until;
    }
    if (Object.keys(kept).length > 0) state.leases = kept;
  }
  return { result, state, changed, expiresAtMs: Math.ceil(state.expiresAtUs / 1000) };
}

export type Mutable<T> = { -readonly [K in keyof T]: T[K] };

export function unchanged(result: StoreResult, state: KeyState | undefined): StateEvaluation {
  return { result, state, changed: false, expiresAtMs: 0 };
}

/** The length of a lease call's reply for `count` policies: allowed, 4 figures and a mark per policy, granted, life, now. */
export const leaseReplyLength = (count: number): number => 1 + count * 5 + 3;
