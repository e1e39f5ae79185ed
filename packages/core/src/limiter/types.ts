import type { Duration } from "../duration.ts";
import type { Policy } from "../policy.ts";
import type { ResilientStoreOptions } from "../stores/resilient-store.ts";
import type { RateLimitStore, StoreSource } from "../stores/store.ts";

/*
 * What applications see of a limiter: its options, its decisions and its reservations.
 */

/** One policy's figures within a {@link Decision}. */
export interface PolicyDecision {
  /** The policy's name. */
  readonly policy: string;
  /** Whether this policy alone admits the request. */
  readonly allowed: boolean;
  /** The policy's limit (a token bucket's capacity). */
  readonly limit: number;
  /** Whole units left after this request (as things stand, when nothing was charged). Never negative. */
  readonly remaining: number;
  /** Epoch ms when this policy's quota is fully restored (see each policy factory). */
  readonly resetAt: number;
  /** 0 when this policy admits; else ms until it would; `Infinity` when the cost exceeds its limit. */
  readonly retryAfterMs: number;
}

/** A policy whose warning threshold (`warnAt`) a request crossed. */
export interface PolicyWarning {
  /** The policy's name. */
  readonly policy: string;
  /** The fraction of the limit used that triggers the warning, e.g. 0.8. */
  readonly threshold: number;
  /** The policy's limit (a token bucket's capacity). */
  readonly limit: number;
  /** Whole units left after this request. */
  readonly remaining: number;
}

/**
 * The answer to `limit()` or `peek()`. The top-level figures are those of the binding policy:
 * when denied, the denying policy with the longest wait; when allowed, the one with the fewest
 * units remaining.
 */
export interface Decision {
  /** Whether every policy admits the request (and it was charged, for `limit()` and `decide()`). */
  readonly allowed: boolean;
  /** The binding policy's limit (a token bucket's capacity). */
  readonly limit: number;
  /** Whole units the binding policy has left after this request. Never negative. */
  readonly remaining: number;
  /** Epoch ms when the binding policy's quota is fully restored. */
  readonly resetAt: number;
  /** 0 when allowed; else the exact ms until the same request would be allowed (`Infinity`: never). */
  readonly retryAfterMs: number;
  /** Name of the binding policy. */
  readonly policy: string;
  /** Every policy's own figures, in the order the policies were given. */
  readonly policies: readonly PolicyDecision[];
  /**
   * The shadow policies' own figures (`shadowPolicy`), in their order: decided and charged only
   * when every enforced policy admits the request, never deciding it. Empty when the limiter has
   * none, or when the enforced policies denied (the shadow ones were then not asked).
   */
  readonly shadow: readonly PolicyDecision[];
  /** The `warnAt` thresholds this request crossed (usually none): once per crossing, not on every request after it. */
  readonly warnings: readonly PolicyWarning[];
  /**
   * What this admission was charged into, for a late `refund(key, { charge })`; `undefined` for
   * denials and peeks. Opaque and JSON-serializable: keep it (or send it along) as it is.
   */
  readonly charge: Charge | undefined;
  /**
   * Where the answer came from: `"store"`, the store's backend; `"cache"`, state the store keeps
   * locally (a Redis store's deny cache answered a known denial with no round trip); `"lease"`,
   * this instance's lease in leased mode (`mode: "leased"`, no store call). For metrics: a
   * denial from the cache and an admission from a lease cost no store call.
   */
  readonly source: StoreSource | "lease";
  /**
   * What the limiter does after this decision, as a promise that never rejects: for a
   * reservation's decision, it resolves once a settle or cancel of it has finished (never before
   * one is started); in leased mode, the background refresh of a lease this decision started;
   * for any other decision, it is already resolved. Hand it to a runtime's
   * `waitUntil` so that a frozen function does not drop a settlement.
   */
  readonly pending: Promise<void>;
}

/**
 * What one admitted request was charged into: its cost and, per policy, a mark naming the
 * window, log entry or bucket time it went into (docs/refunds.md). Opaque: read nothing from it
 * but pass it to `refund()`; plain data, so it survives `JSON.stringify`/`JSON.parse`.
 */
export interface Charge {
  /** The units charged. */
  readonly cost: number;
  /** Per policy, in the limiter's order: the window index, log timestamp or bucket time charged. */
  readonly marks: readonly number[];
  /** Per shadow policy (`shadowPolicy`), when they were charged too: what they were charged into. */
  readonly shadow?: readonly number[];
}

/** Options of {@link createRateLimiter}. */
export interface RateLimiterOptions {
  /** One policy, or several that must all admit a request (checked and charged atomically). */
  policy: Policy | readonly Policy[];
  /** Where state lives; default a new {@link memoryStore}. */
  store?: RateLimitStore;
  /** Namespace of this limiter's keys in the store (default `"fg:"`); no `{`, `}` or NUL. */
  prefix?: string;
  /** Epoch milliseconds; default `Date.now`. Stores on server time (Redis) ignore it. */
  clock?: () => number;
  /**
   * The deadline, circuit breaker and bound on calls in flight around `store` (see
   * {@link resilientStore}); default its defaults (1,000 ms deadline, breaker on, 1,000 calls in
   * flight), shared by every limiter on the same store. A failed call rejects with `STORE_ERROR`,
   * `STORE_TIMEOUT` or `STORE_UNAVAILABLE`. `false` calls the store bare. Not applied to the
   * memory store (it answers synchronously and cannot hang) or to a store already wrapped.
   */
  resilience?: false | ResilientStoreOptions;
  /**
   * `"exact"` (default): one store call per decision. `"leased"`: an admitted request may also
   * charge units in advance (a lease) that this instance then admits from with no store call,
   * admitting nothing exact mode would refuse (docs/leases.md). Decided exactly all the same: a
   * set with a sliding log, and stores without leases (the memory store).
   */
  mode?: "exact" | "leased";
  /**
   * Leased mode: the look-ahead and longest life of a lease, ms (default 5000). A token bucket
   * keeps what it refills in this time in reserve; more than 25% of its capacity is refused
   * (`LEASE_UNSUITABLE`).
   */
  leaseMs?: number;
  /**
   * Policies decided and charged in shadow: they never decide a request, and are reported in
   * {@link Decision.shadow}. They are decided, as their own set in a namespace of their own
   * (`<prefix>shadow:`), only when every enforced policy admits the request, and charged only when
   * they admit it too: their count is what enforcing them would keep. Refunds, settlements,
   * resets and penalties reach them too; blocks do not. Names must differ from the enforced ones'.
   */
  shadowPolicy?: Policy | readonly Policy[];
  /**
   * Warn when a request crosses a fraction of a policy's limit used (0.8: 80%), reported in
   * {@link Decision.warnings} on the request that crosses it only: once per window for a window
   * policy, once per crossing for a token bucket. One fraction for every policy (shadow ones
   * too), or an object mapping policy names to fractions.
   */
  warnAt?: number | Readonly<Record<string, number>>;
}

/** Options of one `limit()` call. */
export interface LimitOptions {
  /** Units this request costs (default 1): a whole number >= 1, charged whole or not at all. */
  cost?: number;
}

/** Options of `refund()`. */
export interface RefundOptions {
  /** Units to give back: a whole number >= 1; default the charge's cost, or 1 without a charge. */
  cost?: number;
  /**
   * The admission's {@link Decision.charge}: the refund then goes only into what that request
   * was charged in, and is a no-op where that no longer counts (a window that has passed, a
   * bucket granted to since). Refund a charge once, in whole or in part: a later request may be
   * charged into the same window or bucket time, and a second refund would take its units.
   * Without a charge, units go back into the current state: for manual corrections, not for late
   * refunds.
   */
  charge?: Charge;
}

/** A rate limiter over one or more policies and one store. */
export interface RateLimiter {
  /** Decides for `key` and charges `cost` when every policy admits it; a denial charges nothing. */
  limit(key: string, options?: LimitOptions): Promise<Decision>;
  /**
   * The same decision as `limit()`, returned synchronously when the store answers synchronously
   * (the memory store always does): no promise and no microtask on the hot path. With a remote
   * store it returns the promise. A bad argument throws instead of rejecting.
   */
  decide(key: string, options?: LimitOptions): Decision | Promise<Decision>;
  /** The decision a request of cost 1 would get now, charging nothing. */
  peek(key: string): Promise<Decision>;
  /**
   * Gives back `cost` units, never below empty. With `charge` (a decision's), only into what that
   * request was charged in: the way to take back a request that should not have counted, however
   * late. Without, into the current state: for manual corrections, not for late refunds.
   */
  refund(key: string, options?: RefundOptions): Promise<void>;
  /** Clears exactly this key's state (its block too) and nothing else (outstanding reservations of it stay until settled or expired). */
  reset(key: string): Promise<void>;
  /**
   * Charges `cost` units (default 1) to every policy whatever they admit: a failed login found out
   * after the request was admitted. Saturating: a policy with fewer units left takes what it
   * has, its state goes to full and no further (nothing is carried beyond), so the key is
   * denied until the state recovers as the algorithm recovers it.
   */
  penalty(key: string, options?: LimitOptions): Promise<void>;
  /** Denies every request of `key` for `duration` (ms or `"1h"`), whatever the policies say, replacing any block it has. */
  block(key: string, duration: Duration): Promise<void>;
  /** Lifts `key`'s block; its counters stay. */
  unblock(key: string): Promise<void>;
  /**
   * Reserves `estimate` units (default 1) for work whose cost is known only afterwards, in one
   * atomic store step over every policy (each concurrency policy holds one unit): all charge it,
   * or, on a denial, none does and nothing is reserved. Settle the reservation with its true
   * cost, or cancel it, when the work ends; never settled, it expires after `ttl` and counts as
   * its estimate. See docs/reservations.md.
   */
  reserve(key: string, options?: ReserveOptions): Promise<Reservation>;
  /**
   * Settles a reservation by its key and id (from another process, a job queue): as
   * `reservation.settle(actual)`, once; `actual: 0` cancels it. Resolves `true` when this call
   * settled it, `false` when nothing was outstanding under that id.
   */
  settle(key: string, options: SettleOptions): Promise<boolean>;
  /**
   * Resolves once every settlement and refund this limiter has started has finished and, in
   * leased mode, every lease it holds has been given back to the store (unspent units, into what
   * they were charged in): call it before an instance goes away (a SIGTERM handler), or in a
   * test. A failed settlement or refund is reported by that call's own promise, not here; this
   * rejects only when a lease could not be given back (its units stay charged until it expires),
   * once the rest has finished.
   */
  flush(): Promise<void>;
  /** `"leased"` when decisions may be served from leases; else `"exact"`. */
  readonly mode: "exact" | "leased";
  /** The policies this limiter checks, in the order they were given. */
  readonly policies: readonly Policy[];
  /** Its shadow policies (`shadowPolicy`), when it has any. */
  readonly shadowPolicies?: readonly Policy[];
  /** Its `warnAt` option, when it has one. */
  readonly warnAt?: number | Readonly<Record<string, number>>;
  /** The store holding the state (the default memory store when none was given). */
  readonly store: RateLimitStore;
  /** The namespace of this limiter's keys in the store (default `"fg:"`). */
  readonly prefix: string;
}

/** Options of `limiter.reserve()`. */
export interface ReserveOptions {
  /** Units to reserve now (default 1): a whole number >= 1, charged to every policy but concurrency ones (one unit each). */
  estimate?: number;
  /**
   * How long the reservation can be settled (default ten minutes, or the longest concurrency
   * timeout of the limiter when longer; at most one day, and never shorter than a concurrency
   * timeout): milliseconds or a string such as `"30s"`. Unsettled by then, it counts as its estimate.
   */
  ttl?: number | string;
}

/** Options of `limiter.settle()`. */
export interface SettleOptions {
  /** The reservation's {@link Reservation.id}. */
  id: string;
  /** Its true cost: a whole number >= 0 (0 cancels it). */
  actual: number;
}

/**
 * What `limiter.reserve()` gives: the decision and, when admitted, the handle to settle it.
 * A denial reserves nothing; its `settle` and `cancel` do nothing and answer `false`.
 */
export interface Reservation {
  /** The decision, as `limit()` would give it; `charge` is `undefined` (settle, do not refund). */
  readonly decision: Decision;
  /** Names the ledger record in the store: unique, plain text, safe in JSON; `""` for a denial. */
  readonly id: string;
  /** The key it was reserved under. */
  readonly key: string;
  /** The units reserved. */
  readonly estimate: number;
  /**
   * Charges `actual` instead of the estimate, into what the reservation was charged in: the
   * difference goes back, or the excess is charged past the limit (later requests wait until it
   * recovers). One store round trip. Idempotent: once settled or cancelled (here or through
   * `limiter.settle`), further calls change nothing and answer `false`. Resolves `true` when this
   * call settled it; rejects with `STORE_*` when the store failed (the reservation may then
   * still be outstanding: a retry is safe).
   */
  settle(actual: number): Promise<boolean>;
  /** Gives everything back (settles at 0): for work that failed before doing anything. Idempotent. */
  cancel(): Promise<boolean>;
}
