import type { Policy, PolicyKind } from "../policy.ts";

/** A value or a promise of it: the memory store answers synchronously, Redis stores asynchronously. */
export type MaybePromise<T> = T | Promise<T>;

/** Whether a store's (or a user function's) answer is a promise, to be awaited, or the value itself. */
export const isThenable = <T>(value: MaybePromise<T>): value is Promise<T> => typeof (value as Promise<T>)?.then === "function";

/**
 * What a limiter hands a store with every call: its namespace and its policies. A limiter builds
 * it once, so stores may cache work per set (a memory layout, a script's arguments).
 */
export interface PolicySet {
  /** Namespace of the limiter's keys. Contains no `{`, `}` or NUL. */
  readonly prefix: string;
  /** One or more policies, checked together. */
  readonly policies: readonly Policy[];
}

/**
 * Tells a store that the caller stopped waiting for this call (its deadline passed): a store
 * should then send nothing more for it (no follow-up command). `AbortSignal` is one.
 */
export interface CallSignal {
  /** True once the caller has abandoned the call. */
  readonly aborted: boolean;
  /**
   * Optional, for a store that declares {@link RateLimitStore.notesDenials}: a `consume` calls it
   * once with its answer when that answer is a denial, before the call's promise resolves (a
   * wrapper such as the deny cache then returns the store's promise without awaiting it).
   */
  denied?(result: StoreResult): void;
}

/**
 * Where a wrapper that reads the time as it sends a call (the resilient store, for the call's
 * deadline) leaves that reading on the call's signal, in ms on `performance.now()`'s clock, so
 * that a wrapper inside it (the deny cache) need not read the clock again. Internal to this package.
 */
export const SENT_AT: unique symbol = Symbol("floodgate.sentAt");

/**
 * A store's answer: `[allowed, ...per policy (allowed, remaining, resetAt, retryAfterMs)]`,
 * `allowed` as 1 or 0, times in epoch ms, `retryAfterMs` -1 when the cost exceeds that
 * policy's limit; after a charged admission (never a denial or a peek), then one mark per
 * policy: an integer naming what the charge went into, for {@link RateLimitStore.refund}.
 * Flat numbers, because that is what a Redis script can return cheaply.
 */
export type StoreResult = readonly number[];

/**
 * Where a store's answer came from: `"store"`, its backend (the Redis server, the memory store's
 * own state); `"cache"`, state the store keeps locally in front of its backend (a Redis store's
 * deny cache answered a known denial with no round trip). Read as the decision's `source`.
 */
export type StoreSource = "store" | "cache";

/** A {@link StoreResult} that a store answered from local state rather than its backend: it names that source. */
export interface LocalStoreResult extends ReadonlyArray<number> {
  /** Which local state answered (never `"store"`: a result without `source` came from the backend). */
  readonly source: Exclude<StoreSource, "store">;
}

/**
 * Marks `result` as answered by the store's local state `source` (a deny cache's hit), for the
 * limiter to report as the decision's `source`; a result not marked is the backend's.
 */
export function answeredLocally(result: number[], source: LocalStoreResult["source"]): LocalStoreResult {
  // Not enumerable: the result stays the flat list of numbers it is to everything that lists it.
  return Object.defineProperty(result, "source", { value: source }) as unknown as LocalStoreResult;
}

/** The source of a store's answer: the one it was marked with by {@link answeredLocally}, else `"store"`. */
export const sourceOf = (result: StoreResult): StoreSource => (result as Partial<LocalStoreResult>).source ?? "store";

/**
 * A leased decision's request to a store (see {@link RateLimitStore.lease} and docs/leases.md).
 * Lives are in ms, on the store's clock.
 */
export interface LeaseRequest {
  /** The request's cost; 0 for no request (a refresh, or only a return). */
  readonly cost: number;
  /** Units wanted for the new lease beyond `cost` (the store may grant fewer, or none). */
  readonly want: number;
  /** Longest life of the new lease, ms. */
  readonly lifeMs: number;
  /** Shortest life worth granting, ms: a window ending sooner gets no lease. */
  readonly minLifeMs: number;
  /** The new lease's id: unique (random), names its ledger record; a retried call with it charges nothing again. */
  readonly id: string;
  /** Previous leases whose unspent units go back, each into what it was charged in, once. */
  readonly returns?: readonly LeaseReturn[];
}

/** A lease given back: see {@link LeaseRequest.returns}. */
export interface LeaseReturn {
  /** The lease's id, as its {@link LeaseRequest} named it. */
  readonly id: string;
  /** Units of it not spent (a larger number gives back the whole lease). */
  readonly unspent: number;
}

/**
 * A reservation a store holds in the limiter's own process (see {@link RateLimitStore.reserveHeld}):
 * the store's answer, and a handle on its ledger record that settles it with no look-up.
 */
export interface HeldReservation {
  /** The store's answer, as `reserve` gives it (the marks follow the figures). */
  readonly result: StoreResult;
  /** The record's id, as `settle(set, key, id, ...)` accepts it from any caller. */
  readonly id: string;
  /** Settles the record, as `settle` would: answers whether it was outstanding. */
  settle(actual: number, nowMs: number): boolean;
}

/** One (policy set, key) pair of a compound step: see {@link RateLimitStore.consumeMany}. */
export interface ManyCall {
  /** The policies to decide, with the namespace their keys live under. */
  readonly set: PolicySet;
  /** The identifier decided against that set. */
  readonly key: string;
}

/**
 * The one store contract. A store evaluates every policy of a set for one key in ONE atomic step:
 * when all admit `cost`, all are charged; when any denies, none is. Implementations: the memory
 * store, the Upstash (HTTP) store and the TCP Redis store, all held to one contract test suite;
 * a store on a database with compare-and-set builds on `evaluateState` (docs/writing-a-store.md).
 */
export interface RateLimitStore {
  /** Short name for logs and errors, e.g. `"memory"`, `"upstash"`, `"redis"`. */
  readonly name: string;
  /**
   * True when the store reads time itself (a Redis server's clock) and ignores `nowMs`.
   */
  readonly ownsClock?: boolean;
  /**
   * True when every operation answers synchronously from this process and cannot hang (the
   * memory store): the limiter then calls it without a deadline or circuit breaker around it.
   */
  readonly synchronous?: boolean;
  /**
   * The kinds of policy this store decides, when not every kind (a store with its own code per
   * kind, such as SQL procedures): a limiter over a policy of another kind is refused at creation.
   */
  readonly kinds?: readonly PolicyKind[];
  /**
   * True when `consume` calls its signal's `denied(result)` (when the signal has one) with every
   * denying answer, before its promise resolves: the deny cache then passes the store's promise
   * on as it is, instead of awaiting it to learn of a denial.
   */
  readonly notesDenials?: boolean;
  /**
   * Checks and, when every policy admits `cost`, charges it. `signal`, when given, turns
   * `aborted` once the caller has abandoned the call: send no further command for it.
   */
  consume(set: PolicySet, key: string, cost: number, nowMs: number, signal?: CallSignal): MaybePromise<StoreResult>;
  /** The same figures for a cost of 1, charging nothing. */
  peek(set: PolicySet, key: string, nowMs: number, signal?: CallSignal): MaybePromise<StoreResult>;
  /**
   * Gives back up to `cost` units to every policy, never beyond an empty state, atomically for the
   * set. With `marks` (one per policy, as a charged `consume` returned them) each policy gives
   * back only into what that charge went into, and nothing where that no longer applies (see
   * docs/refunds.md); without, into the current state.
   */
  refund(set: PolicySet, key: string, cost: number, nowMs: number, marks?: readonly number[]): MaybePromise<void>;
  /**
   * A reservation: `consume` of `cost` and, when every policy admits it, in the same atomic step,
   * a ledger record named `id` (unique, from the limiter) holding the cost and the charge's marks,
   * kept `ttlMs`. The answer is `consume`'s (the marks follow the figures of an admission). A
   * denial charges nothing and records nothing. See docs/reservations.md. Every store of this
   * package implements it (and `settle`); a store without them cannot serve `limiter.reserve()`.
   */
  reserve?(
    set: PolicySet,
    key: string,
    cost: number,
    nowMs: number,
    id: string,
    ttlMs: number,
    signal?: CallSignal,
  ): MaybePromise<StoreResult>;
  /**
   * Settles reservation `id` at its true cost `actual` (0 cancels it), in one atomic step: reads
   * and deletes its ledger record, then per policy gives back `cost − actual` or charges
   * `actual − cost` into the record's marks (each algorithm's `settle`). Without a record (never
   * reserved, settled already, expired) nothing changes; answers whether a record was settled.
   */
  settle?(set: PolicySet, key: string, id: string, actual: number, nowMs: number): MaybePromise<boolean>;
  /**
   * Optional, for a store in the limiter's own process that answers synchronously (the memory
   * store): `reserve`, with the record named by the store itself and handed back, so that settling
   * through the reservation looks nothing up and no id is made unless read. Answers the result of
   * a denial (nothing recorded), or the held reservation. When present, the limiter reserves
   * through it; `settle` by id must still find the records it made.
   */
  reserveHeld?(set: PolicySet, key: string, cost: number, nowMs: number, ttlMs: number): StoreResult | HeldReservation;
  /**
   * Optional (stores without it decide leased limiters exactly): in one atomic step, gives back
   * the unspent units of `request.returns` into what each lease was charged in (once), decides
   * `request.cost` exactly as `consume` (a denial charges and grants nothing) and, when admitted
   * and every policy has enough left, charges up to `request.want` extra units to every policy
   * and records the lease. Answers `[allowed, ...per policy (allowed, remaining, resetAt,
   * retryAfterMs), ...per policy mark (0 when nothing was charged), g, lifeUs, nowUs]`: the units
   * granted, the lease's life from the store's now, and that now (µs). See docs/leases.md. A
   * store without scripts implements it with `evaluateState`'s `"lease"` mode. With it, the
   * limiter serves `mode: "leased"` over this store.
   */
  lease?(set: PolicySet, key: string, request: LeaseRequest, nowMs: number, signal?: CallSignal): MaybePromise<StoreResult>;
  /**
   * Optional (a compound limiter without it charges its dimensions one by one, giving back on a
   * refusal: docs/compound-limits.md): `consume` of `cost` for several (set, key) pairs in ONE
   * atomic step. When every policy of every pair admits, all are charged; when any denies, none
   * is (a denying pair's policies' `block` applies to its key, as in `consume`). Answers one
   * `consume` answer per pair, in order: each pair's `allowed` is its own, and the marks follow
   * the figures of every pair only when all were charged. Answers `undefined`, charging nothing,
   * when these keys cannot share one atomic step where the store runs (a Redis Cluster with keys
   * in different slots). Pairs name distinct keys.
   */
  consumeMany?(
    calls: readonly ManyCall[],
    cost: number,
    nowMs: number,
    signal?: CallSignal,
  ): MaybePromise<readonly StoreResult[] | undefined>;
  /** Deletes exactly this key's state in this set (its block too), nothing else. */
  reset(set: PolicySet, key: string): MaybePromise<void>;
  /**
   * Charges up to `cost` units to every policy whatever they admit, each saturating at full
   * (a policy with fewer units left takes what it has left): a penalty found after the fact.
   * Atomic for the set. Optional for stores written before it; every built-in store has it.
   */
  penalty?(set: PolicySet, key: string, cost: number, nowMs: number): MaybePromise<void>;
  /**
   * Denies every request of this key in this set for `durationMs` from `nowMs` (replacing any
   * block it has), whatever the policies say. A store that has `block` also applies policies'
   * `block` option in `consume`: when a consume is denied by a policy with `blockMs > 0`, the key
   * is blocked for the longest such `blockMs`, in the same atomic step; while blocked, `consume`
   * and `peek` report every policy denied with 0 remaining and `retryAfterMs` (and `resetAt`) at
   * least until the block ends, and charge nothing.
   */
  block?(set: PolicySet, key: string, durationMs: number, nowMs: number): MaybePromise<void>;
  /** Lifts this key's block in this set (its counters stay). */
  unblock?(set: PolicySet, key: string): MaybePromise<void>;
  /** Releases timers, connections or memory. The store is unusable afterwards. */
  dispose?(): MaybePromise<void>;
  /**
   * Optional: replaces the store's connection with a fresh one. `resilientStore` calls it when
   * its circuit opens on timeouts: a connection gone half-open (a hop that silently stopped
   * forwarding, while new connections work) would time out every call sent on it, the breaker's
   * probes included, for as long as the client keeps it. Calls in flight on the old connection
   * may fail. Never throws; the Redis stores ask the caller's client to reconnect.
   */
  reconnect?(): MaybePromise<void>;
}
