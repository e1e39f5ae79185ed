import type { StoreResult } from "../store.ts";

/*
 * The plain-data state of one key under one policy set, and what evaluating it answers: the
 * types a store without scripts stores and reads (see evaluate.ts).
 */

/**
 * What to evaluate: charge `cost` when every policy admits it, report for a cost of 1, give `cost`
 * back, charge a penalty of `cost` (saturating), block for `cost` ms, lift the block, reserve
 * `cost` (a consume that also records the reservation), settle one, or decide a leased request
 * (returns, the request and a new lease, as `RateLimitStore.lease` describes).
 */
export type EvaluateMode = "consume" | "peek" | "refund" | "penalty" | "block" | "unblock" | "reserve" | "settle" | "lease";

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
  /** When the key's block ends (epoch µs); absent or 0 when it has none. */
  readonly blockedUntilUs?: number;
  /**
   * Outstanding reservations by id: `[expiresAtUs, estimate, ...one mark per policy]`. Absent
   * when there are none. `expiresAtUs` of the state is never before theirs.
   */
  readonly reservations?: { readonly [id: string]: readonly number[] };
  /**
   * Leases granted and not yet returned, by id: the lease's reply as charged, with the lease's
   * end (epoch µs) where the reply has its life (see `RateLimitStore.lease`). Absent when
   * there are none; each is kept {@link LEASE_RECORD_GRACE_MS} past its end for a late return.
   */
  readonly leases?: { readonly [id: string]: readonly number[] };
}

/** How long a lease's record outlives its end, so that a return sent just before the end still finds it. */
export const LEASE_RECORD_GRACE_MS = 10_000;

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
