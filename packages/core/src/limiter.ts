import { FIELDS_PER_POLICY, NEVER, traitsOf } from "./algorithms/algorithm.ts";
import { describeValue, FloodgateError } from "./errors.ts";
import { FOREIGN_OPTIONS } from "./foreign-options.ts";
import { checkLeasable } from "./leases/rules.ts";
import { DEFAULT_LEASE_MS, type LeasedDecider, leasedDecider } from "./leases/decider.ts";
import { isMemoryStore, type LedgerRecord, memoryLedgerOf, memoryStore, RESERVE, SETTLE } from "./stores/memory-store.ts";
import { isResilientStore, resilientStore, type ResilientStoreOptions, unwrapStore } from "./stores/resilient-store.ts";
import { type Duration, DURATION_ACCEPTED, durationMs } from "./duration.ts";
import { MAX_BLOCK_MS } from "./algorithms/window-options.ts";
import { isPolicies, POLICIES_ACCEPTED, type Policy } from "./policies.ts";
import { type MaybePromise, type PolicySet, type RateLimitStore, sourceOf, type StoreResult, type StoreSource } from "./stores/store.ts";
import { CLOCK_ACCEPTED, isFunction, isRecord, isStore, type OptionSpecs, parseOptions, prefixOf, STORE_ACCEPTED } from "./validation.ts";
import {
  checkActual,
  checkId,
  DEFAULT_RESERVATION_TTL_MS,
  MAX_RESERVATION_TTL_MS,
  nextId,
  type Reservation,
  ReservationImpl,
  type ReservationVia,
  type ReserveOptions,
  RESOLVED,
  type SettleOptions,
} from "./reservations.ts";

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
  /** The store holding the state (the default memory store when none was given). */
  readonly store: RateLimitStore;
  /** The namespace of this limiter's keys in the store (default `"fg:"`). */
  readonly prefix: string;
}

const OPTIONS: OptionSpecs = {
  policy: [isPolicies, `${POLICIES_ACCEPTED} with unique names`, 1],
  // `null` means the default store, as `undefined` does.
  store: [(v) => v === null || isStore(v), STORE_ACCEPTED],
  prefix: /* @__PURE__ */ prefixOf(128),
  clock: [isFunction, CLOCK_ACCEPTED],
  // Checked in detail by resilientStore().
  resilience: [
    (v) => v === false || isRecord(v),
    "false, or the options of resilientStore() ({ timeoutMs?, circuitBreaker?, maxInFlight?, logger?, onFailure? })",
  ],
  mode: [(v) => v === "exact" || v === "leased", '"exact" (default) or "leased"'],
  leaseMs: [
    (v) => typeof v === "number" && Number.isInteger(v) && v >= 100 && v <= 3_600_000,
    "a whole number of ms from 100 to 3600000 (default 5000)",
  ],
};

/** One wrapper per store for limiters that keep the default resilience: the bound and breaker are per store. */
const defaultResilient = new WeakMap<RateLimitStore, RateLimitStore>();

/** The store a limiter calls: `store` behind the resilience it asks for. */
function guardedStore(store: RateLimitStore, resilience: false | ResilientStoreOptions | undefined): RateLimitStore {
  if (resilience === false || isMemoryStore(store) || isResilientStore(store)) return store;
  if (resilience !== undefined) return resilientStore(store, resilience);
  let guarded = defaultResilient.get(store);
  if (guarded === undefined) defaultResilient.set(store, guarded = resilientStore(store));
  return guarded;
}

/** What each limiter was made with, for a layer that rebuilds it over another store (the HTTP layer's own guard). */
const MADE_WITH = new WeakMap<RateLimiter, { store: RateLimitStore; clock: () => number; mode?: "leased"; leaseMs?: number }>();

/**
 * The same limiter (policies, prefix, clock) over `store`, with no resilience of its own: for
 * the HTTP layer, which wraps the store with its own options.
 */
export function rebindLimiter(limiter: RateLimiter, store: (bare: RateLimitStore) => RateLimitStore): RateLimiter {
  const made = MADE_WITH.get(limiter);
  if (made === undefined) return limiter;
  return createRateLimiter({
    policy: limiter.policies,
    prefix: limiter.prefix,
    clock: made.clock,
    store: store(made.store),
    resilience: false,
    ...(made.mode === undefined ? {} : { mode: made.mode, leaseMs: made.leaseMs }),
  });
}

/**
 * Creates a rate limiter. Several policies (e.g. 10 per second AND 1000 per day) are checked in
 * one atomic store step: a request is admitted only when all admit it, and a denial charges none.
 *
 * @param options.policy - one policy or an array of them
 * @param options.store - default `memoryStore()`
 * @param options.prefix - key namespace, default `"fg:"`
 * @param options.clock - epoch-ms clock, default `Date.now`
 * @param options.resilience - deadline, breaker and in-flight bound around a remote store (default on; `false`: off)
 * @example
 * const limiter = createRateLimiter({ policy: [tokenBucket({ capacity: 10, refillRate: 1 }), fixedWindow({ limit: 1000, window: "1d" })] });
 * const decision = await limiter.limit("user:42");
 * if (!decision.allowed) console.log(`retry in ${decision.retryAfterMs} ms`);
 */
export function createRateLimiter(options: RateLimiterOptions): RateLimiter {
  const o = parseOptions<RateLimiterOptions>(options, "createRateLimiter()", OPTIONS, FOREIGN_OPTIONS);
  const policies = Object.freeze(Array.isArray(o.policy) ? [...o.policy] : [o.policy]) as readonly Policy[];
  if (new Set(policies.map((p) => p.name)).size !== policies.length) {
    throw new FloodgateError(
      "INVALID_OPTION",
      `createRateLimiter(): invalid option \`policy\`: two policies share a name (${
        policies.map((p) => p.name).join(", ")
      }); give each a distinct \`name\`.`,
    );
  }
  const bare = o.store ?? memoryStore();
  const blocking = policies.find((p) => p.blockMs > 0);
  if (blocking !== undefined && typeof unwrapStore(bare).block !== "function") {
    throw new FloodgateError(
      "INVALID_OPTION",
      `createRateLimiter(): policy "${blocking.name}" has a \`block\`, but the ${bare.name} store has no \`block\` operation; use a built-in store, or add block, unblock and penalty to this one (docs/writing-a-store.md).`,
    );
  }
  const store = guardedStore(bare, o.resilience);
  const clock = o.clock ?? Date.now;
  // The store gets its own unfrozen copy: optimized code reads a frozen array's elements through
  // a generic inline cache, ~70 machine instructions per decision (measured with callgrind).
  const set: PolicySet = Object.freeze({ prefix: o.prefix ?? "fg:", policies: [...policies] });
  const single = policies.length === 1 ? policies[0]! : undefined;
  const holding = policies.find((p) => traitsOf(p).holdsUnits);
  const defaultTtlMs = Math.min(
    MAX_RESERVATION_TTL_MS,
    Math.max(DEFAULT_RESERVATION_TTL_MS, ...policies.map((p) => (traitsOf(p).holdsUnits ? p.windowMs : 0))),
  );
  /** Settlements and refunds still in flight, for flush(). */
  const outstanding = new Set<Promise<unknown>>();
  const track = <T>(call: Promise<T>): Promise<T> => {
    outstanding.add(call);
    const done = (): void => {
      outstanding.delete(call);
    };
    call.then(done, done);
    return call;
  };
  /** A synchronous store's answer as it is (the reservation makes no promise for it); a remote one's promise, tracked for flush(). May throw. */
  const settleNow = (key: string, id: string, actual: number): boolean | Promise<boolean> => {
    const answer = store.settle!(set, key, id, actual, clock());
    return typeof answer === "boolean" ? answer : track(Promise.resolve(answer));
  };
  /** Over the memory store: its ledger, which hands each reservation's record to its handle. */
  const memory = memoryLedgerOf(store);
  const via: ReservationVia = {
    // A reservation's decision has cost 0: no charge (it is settled, not refunded).
    decide(result, reservation) {
      const decision = toDecision(result, 0);
      (decision as unknown as Record<symbol, ReservationImpl>)[RESERVATION] = reservation;
      return decision;
    },
    settle: (key, ref, actual) => typeof ref === "string" ? settleNow(key, ref, actual) : memory![SETTLE](set, ref, actual, clock()),
  };
  const reservationOf = (result: StoreResult, key: string, estimate: number, ref: string | LedgerRecord): Reservation =>
    new ReservationImpl(result, via, result[0] === 1 ? ref : "", key, estimate);

  const toDecision = (result: StoreResult, cost: number): Decision =>
    single !== undefined ? new SingleDecision(result, single, cost) : new MultiDecision(result, policies, cost);

  /** Synchronous store answers become decisions at once; remote ones when they arrive. */
  const decide = (result: MaybePromise<StoreResult>, cost: number): Decision | Promise<Decision> =>
    Array.isArray(result) ? toDecision(result, cost) : Promise.resolve(result).then((r) => toDecision(r, cost));
  // `null` options are no options, as `undefined` are (not a TypeError from reading `.cost`).
  const costOf = (options: LimitOptions | undefined): number => (options?.cost === undefined ? 1 : checkCost(options.cost));

  const leaseMs = o.leaseMs ?? DEFAULT_LEASE_MS;
  const leased: LeasedDecider | undefined =
    o.mode === "leased" && checkLeasable("createRateLimiter()", policies, leaseMs) && typeof unwrapStore(bare).lease === "function"
      ? leasedDecider({ store, set, clock, ownsClock: bare.ownsClock === true, lifeMs: leaseMs, toDecision, setPending })
      : undefined;

  const decideNow = (key: string, options?: LimitOptions): Decision | Promise<Decision> => {
    if (holding !== undefined) throw holdsError(holding);
    checkKey(key);
    const cost = costOf(options);
    if (leased !== undefined) return leased.decide(key, cost);
    return decide(store.consume(set, key, cost, clock()), cost);
  };
  const peekNow = (key: string): Decision | Promise<Decision> => {
    checkKey(key);
    return decide(store.peek(set, key, clock()), 0);
  };

  const limiter: RateLimiter = Object.freeze({
    policies,
    store,
    prefix: set.prefix,
    mode: leased === undefined ? "exact" : "leased",
    decide: decideNow,
    // Not `async`: awaiting inside would add a promise and a microtask turn to every call.
    limit(key: string, options?: LimitOptions): Promise<Decision> {
      try {
        if (holding !== undefined) throw holdsError(holding);
        checkKey(key);
        const cost = costOf(options);
        if (leased !== undefined) return Promise.resolve(leased.decide(key, cost));
        const result = store.consume(set, key, cost, clock());
        if (single === undefined || !Array.isArray(result)) return Promise.resolve(decide(result, cost));
        // The decision is made here, not through `toDecision`, and resolved at once: the
        // optimizing compiler then sees its shape, knows it has no `then`, and fulfills the
        // promise without looking one up (see singleDecision).
        return Promise.resolve(singleDecision(result, single, cost));
      } catch (error) {
        return Promise.reject(error);
      }
    },
    peek(key: string): Promise<Decision> {
      try {
        return Promise.resolve(peekNow(key));
      } catch (error) {
        return Promise.reject(error);
      }
    },
    refund(key: string, options?: RefundOptions): Promise<void> {
      return track(refundNow(key, options));
    },
    async reset(key: string): Promise<void> {
      checkKey(key);
      await store.reset(set, key);
    },
    async penalty(key: string, options?: LimitOptions): Promise<void> {
      checkKey(key);
      const cost = costOf(options);
      lacking(bare, "penalty");
      await store.penalty!(set, key, cost, clock());
    },
    async block(key: string, duration: Duration): Promise<void> {
      checkKey(key);
      const ms = durationMs(duration);
      if (ms === undefined || ms > MAX_BLOCK_MS) {
        throw new FloodgateError(
          "INVALID_ARGUMENT",
          `Invalid block duration: received ${describeValue(duration)}; expected ${DURATION_ACCEPTED}, of at most 10 years.`,
        );
      }
      lacking(bare, "block");
      await store.block!(set, key, ms, clock());
    },
    async unblock(key: string): Promise<void> {
      checkKey(key);
      lacking(bare, "unblock");
      await store.unblock!(set, key);
    },
    reserve(key: string, options?: ReserveOptions): Promise<Reservation> {
      try {
        checkKey(key);
        const estimate = options?.estimate === undefined ? 1 : checkEstimate(options.estimate);
        const ttlMs = options?.ttl === undefined ? defaultTtlMs : checkTtl(options.ttl);
        if (store.reserve === undefined || store.settle === undefined) {
          throw new FloodgateError(
            "INVALID_ARGUMENT",
            `limiter.reserve(): the ${store.name} store does not implement reservations (its reserve and settle operations); every store of @floodgate/core does (see docs/writing-a-store.md).`,
          );
        }
        if (memory !== undefined) {
          const answer = memory[RESERVE](set, key, estimate, clock(), ttlMs);
          return Promise.resolve(
            Array.isArray(answer)
              ? reservationOf(answer, key, estimate, "")
              : reservationOf((answer as LedgerRecord).result, key, estimate, answer as LedgerRecord),
          );
        }
        const id = nextId();
        const result = store.reserve(set, key, estimate, clock(), id, ttlMs);
        if (Array.isArray(result)) return Promise.resolve(reservationOf(result, key, estimate, id));
        return Promise.resolve(result).then((r) => reservationOf(r, key, estimate, id));
      } catch (error) {
        return Promise.reject(error);
      }
    },
    settle(key: string, options: SettleOptions): Promise<boolean> {
      try {
        checkKey(key);
        if (typeof options !== "object" || options === null) checkId(undefined);
        return Promise.resolve(settleNow(key, checkId(options.id), checkActual(options.actual)));
      } catch (error) {
        return Promise.reject(error);
      }
    },
    async flush(): Promise<void> {
      // Every settlement is awaited even when a lease could not be given back (then rejected with).
      const leases = leased?.flush();
      leases?.catch(() => {});
      while (outstanding.size > 0) await Promise.allSettled([...outstanding]);
      await leases;
    },
  });
  async function refundNow(key: string, options?: RefundOptions): Promise<void> {
    {
      checkKey(key);
      const charge = options?.charge;
      if (charge === undefined) {
        await store.refund(set, key, costOf(options), clock());
        return;
      }
      checkCharge(charge, policies.length);
      const cost = options!.cost === undefined ? charge.cost : checkCost(options!.cost);
      if (cost > charge.cost) {
        throw new FloodgateError(
          "INVALID_ARGUMENT",
          `Invalid refund: cost ${cost} exceeds the charge's cost ${charge.cost}; a refund into a charge gives back at most what was charged.`,
        );
      }
      await store.refund(set, key, cost, clock(), charge.marks);
    }
  }
  MADE_WITH.set(limiter, o.mode === "leased" ? { store: bare, clock, mode: "leased", leaseMs } : { store: bare, clock });
  return limiter;
}

/** Throws when `store` (under any resilient wrapper) lacks `operation`, as a store written before it may. */
function lacking(store: RateLimitStore, operation: "penalty" | "block" | "unblock"): void {
  if (typeof unwrapStore(store)[operation] === "function") return;
  throw new FloodgateError(
    "INVALID_ARGUMENT",
    `The ${store.name} store has no \`${operation}\` operation; penalties and blocks need a built-in store, or one that implements penalty, block and unblock (docs/writing-a-store.md).`,
  );
}

/** Where a reservation's decision keeps its reservation (for `pending`). */
const RESERVATION: unique symbol = Symbol("reservation");

/** Where a leased decision keeps the background refresh it started (for `pending`). */
const REFRESH: unique symbol = Symbol("refresh");

/** Sets the `pending` of a leased decision: the lease refresh it started. */
function setPending(decision: Decision, refresh: Promise<void>): void {
  (decision as unknown as { [REFRESH]?: Promise<void> })[REFRESH] = refresh;
}

/** The `pending` of a decision: its reservation's, its lease refresh, or resolved. */
function pendingOf(decision: object): Promise<void> {
  const d = decision as { [RESERVATION]?: ReservationImpl; [REFRESH]?: Promise<void> };
  return d[RESERVATION]?.pending() ?? d[REFRESH] ?? RESOLVED;
}

function holdsError(policy: Policy): FloodgateError {
  return new FloodgateError(
    "INVALID_ARGUMENT",
    `limit() and decide() cannot take a concurrency policy ("${policy.name}"): nothing would release the unit it holds. Use limiter.reserve(key) and settle or cancel the reservation when the request ends, or a limiter without the concurrency policy.`,
  );
}

function checkEstimate(estimate: unknown): number {
  if (typeof estimate !== "number" || !Number.isInteger(estimate) || estimate < 1 || estimate > Number.MAX_SAFE_INTEGER) {
    throw new FloodgateError(
      "INVALID_ARGUMENT",
      `Invalid estimate: received ${
        describeValue(estimate)
      }; expected a whole number from 1 to 9007199254740991 (Number.MAX_SAFE_INTEGER).`,
    );
  }
  return estimate;
}

function checkTtl(ttl: unknown): number {
  const ms = durationMs(ttl);
  if (ms === undefined || ms > MAX_RESERVATION_TTL_MS) {
    throw new FloodgateError(
      "INVALID_ARGUMENT",
      `Invalid reservation ttl: received ${
        describeValue(ttl)
      }; expected a duration from 1 ms to one day: a whole number of milliseconds, or a string like "30s", "10m", "1h".`,
    );
  }
  return ms;
}

function checkKey(key: unknown): void {
  if (typeof key !== "string" || key.length === 0 || key.length > 1024 || key.charCodeAt(0) === 0) {
    throw new FloodgateError(
      "INVALID_ARGUMENT",
      `Invalid key: received ${describeValue(key)}; expected a non-empty string of at most 1024 characters not starting with NUL.`,
    );
  }
}

function checkCost(cost: unknown): number {
  if (typeof cost !== "number" || !Number.isInteger(cost) || cost < 1 || cost > Number.MAX_SAFE_INTEGER) {
    throw new FloodgateError(
      "INVALID_ARGUMENT",
      `Invalid cost: received ${describeValue(cost)}; expected a whole number from 1 to 9007199254740991 (Number.MAX_SAFE_INTEGER).`,
    );
  }
  return cost;
}

function checkCharge(charge: unknown, policyCount: number): asserts charge is Charge {
  const c = charge as Partial<Charge> | null;
  const marks = typeof c === "object" && c !== null ? c.marks : undefined;
  if (
    typeof c !== "object" || c === null || !Array.isArray(marks) || marks.length !== policyCount ||
    !marks.every((m) => Number.isSafeInteger(m)) || typeof c.cost !== "number" || !Number.isSafeInteger(c.cost) || c.cost < 1
  ) {
    throw new FloodgateError(
      "INVALID_ARGUMENT",
      `Invalid charge: received ${
        describeValue(charge)
      }; expected the \`charge\` of an admitted decision of this limiter (its cost and ${policyCount} mark${
        policyCount === 1 ? "" : "s"
      }), as it was returned.`,
    );
  }
}

/** The charge of an admitted, charged decision: the marks follow the figures. */
function chargeOf(result: StoreResult, count: number, cost: number): Charge | undefined {
  const at = 1 + count * FIELDS_PER_POLICY;
  if (result[0] !== 1 || cost === 0 || result.length < at + count) return undefined;
  return { cost, marks: result.slice(at, at + count) };
}

const retryOf = (raw: number): number => (raw === NEVER ? Infinity : raw);

/**
 * A decision over one policy. `decide()` builds it with the constructor, the cheapest way to make
 * an object; `limit()` with {@link singleDecision}, which gives the same object (prototype, own
 * properties in the same order) by `Object.create`. `policies` is built on first read and kept.
 */
class SingleDecision {
  declare readonly allowed: boolean;
  declare readonly limit: number;
  declare readonly remaining: number;
  declare readonly resetAt: number;
  declare readonly retryAfterMs: number;
  declare readonly policy: string;
  declare readonly charge: Charge | undefined;
  declare readonly source: StoreSource;

  constructor(result: StoreResult, policy: Policy, cost: number) {
    fillSingle(this as Mutable<Omit<Decision, "policies">>, result, policy, cost);
  }

  get policies(): readonly PolicyDecision[] {
    let all = POLICIES.get(this);
    if (!all) {
      POLICIES.set(
        this,
        all = Object.freeze([Object.freeze({
          policy: this.policy,
          allowed: this.allowed,
          limit: this.limit,
          remaining: this.remaining,
          resetAt: this.resetAt,
          retryAfterMs: this.retryAfterMs,
        })]),
      );
    }
    return all;
  }

  get pending(): Promise<void> {
    return pendingOf(this);
  }

  toJSON(): object {
    return { ...this, policies: this.policies };
  }
}

/** A single-policy decision's `policies`, once read: kept outside it, so that it has no other own property. */
const POLICIES = new WeakMap<SingleDecision, readonly PolicyDecision[]>();

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

/** Read once: `Object.create` then gets the same prototype object every call, with no property read. */
const SINGLE_DECISION: object = SingleDecision.prototype;

/**
 * A decision over one policy: the store's numbers, on an object made by `Object.create` of
 * {@link SingleDecision}'s prototype, not by `new SingleDecision()`. When `limit()` resolves its
 * promise with it, the optimizing compiler (Node 20) skips the look-up of a `then` method only
 * for an object whose shape it knows from where it was made: so for this one, not for an
 * instance a constructor built. That look-up walks the prototype chain: with the generic promise
 * resolution around it, ≈ 300 machine instructions per `limit()` (measured with callgrind).
 * Properties, their order, the prototype and `toJSON` are those of the class instance.
 */
function singleDecision(result: StoreResult, policy: Policy, cost: number): Decision {
  return fillSingle(Object.create(SINGLE_DECISION) as Mutable<Omit<Decision, "policies">>, result, policy, cost) as Decision;
}

/** Writes a single-policy decision's own properties, in the one order both ways of making it share. */
function fillSingle(
  d: Mutable<Omit<Decision, "policies">>,
  result: StoreResult,
  policy: Policy,
  cost: number,
): Mutable<Omit<Decision, "policies">> {
  d.allowed = result[0] === 1;
  d.limit = policy.limit;
  d.remaining = result[2]!;
  d.resetAt = result[3]!;
  d.retryAfterMs = d.allowed ? 0 : retryOf(result[4]!);
  d.policy = policy.name;
  // A charged admission's mark follows the figures (see chargeOf). Plain data, not frozen:
  // freezing the charge and its marks cost ~1,000 machine instructions per decision (callgrind).
  d.charge = d.allowed && cost > 0 && result.length > 5 ? { cost, marks: [result[5]!] } : undefined;
  d.source = sourceOf(result);
  return d;
}

class MultiDecision implements Decision {
  declare readonly allowed: boolean;
  declare readonly limit: number;
  declare readonly remaining: number;
  declare readonly resetAt: number;
  declare readonly retryAfterMs: number;
  declare readonly policy: string;
  declare readonly policies: readonly PolicyDecision[];
  declare readonly charge: Charge | undefined;
  declare readonly source: StoreSource;

  constructor(result: StoreResult, policies: readonly Policy[], cost: number) {
    this.allowed = result[0] === 1;
    const all: PolicyDecision[] = [];
    let binding = 0;
    for (let p = 0; p < policies.length; p++) {
      const i = 1 + p * FIELDS_PER_POLICY;
      const admitted = result[i] === 1;
      all.push(Object.freeze({
        policy: policies[p]!.name,
        allowed: admitted,
        limit: policies[p]!.limit,
        remaining: result[i + 1]!,
        resetAt: result[i + 2]!,
        retryAfterMs: admitted ? 0 : retryOf(result[i + 3]!),
      }));
      const current = all[binding]!;
      const candidate = all[p]!;
      if (this.allowed) {
        if (candidate.remaining < current.remaining) binding = p;
      } else if (!candidate.allowed && (current.allowed || candidate.retryAfterMs > current.retryAfterMs)) {
        binding = p;
      }
    }
    const chosen = all[binding]!;
    this.limit = chosen.limit;
    this.remaining = chosen.remaining;
    this.resetAt = chosen.resetAt;
    this.retryAfterMs = this.allowed ? 0 : chosen.retryAfterMs;
    this.policy = chosen.policy;
    this.policies = Object.freeze(all);
    this.charge = chargeOf(result, policies.length, cost);
    this.source = sourceOf(result);
  }

  get pending(): Promise<void> {
    return pendingOf(this);
  }
}
