import { traitsOf } from "../algorithms/algorithm.ts";
import { describeValue, FloodgateError } from "../errors.ts";
import { FOREIGN_OPTIONS } from "../foreign-options.ts";
import { checkLeasable } from "../leases/rules.ts";
import { DEFAULT_LEASE_MS, type LeasedDecider, leasedDecider } from "../leases/decider.ts";
import { memoryStore } from "../stores/memory-store.ts";
import { CONSUME_MAPPED, isResilientStore, resilientStore, type ResilientStoreOptions, unwrapStore } from "../stores/resilient-store.ts";
import { DEFAULT_TIMEOUT_MS } from "../stores/resilience/options.ts";
import { type Duration, DURATION_ACCEPTED, durationMs } from "../duration.ts";
import { MAX_BLOCK_MS } from "../algorithms/window-options.ts";
import type { Policy } from "../policy.ts";
import type { HeldReservation, MaybePromise, PolicySet, RateLimitStore, StoreResult } from "../stores/store.ts";
import { parseOptions } from "../validation.ts";
import { nextId } from "../stores/ids.ts";
import {
  checkActual,
  checkCharge,
  checkCost,
  checkEstimate,
  checkId,
  checkKey,
  checkTtl,
  DEFAULT_RESERVATION_TTL_MS,
  holdsError,
  lacking,
  MAX_RESERVATION_TTL_MS,
  OPTIONS,
} from "./checks.ts";
import { linkReservation, MultiDecision, setPending, SingleDecision, singleDecision } from "./decisions.ts";
import { keepInternals } from "./internals.ts";
import { ReservationImpl, type ReservationVia } from "./reservation.ts";
import { observedLimiter, observes } from "./observed.ts";
import type {
  Decision,
  LimitOptions,
  RateLimiter,
  RateLimiterOptions,
  RefundOptions,
  Reservation,
  ReserveOptions,
  SettleOptions,
} from "./types.ts";

/*
 * createRateLimiter(): the options checked once, the store behind its resilience, and the
 * limiter's operations over the store contract (decisions, refunds, blocks, reservations and,
 * in leased mode, the instance's side of leases).
 */

/** A resilient store's consume whose asynchronous answer is made into the decision (see {@link CONSUME_MAPPED}). */
interface ConsumeMapped {
  [CONSUME_MAPPED](
    set: PolicySet,
    key: string,
    cost: number,
    nowMs: number,
    map: (result: StoreResult, cost: number) => Decision,
  ): StoreResult | Promise<Decision>;
}

/** One wrapper per store for limiters that keep the default resilience: the bound and breaker are per store. */
const defaultResilient = new WeakMap<RateLimitStore, RateLimitStore>();

/** The store a limiter calls: `store` behind the resilience it asks for. */
function guardedStore(store: RateLimitStore, resilience: false | ResilientStoreOptions | undefined): RateLimitStore {
  if (resilience === false || store.synchronous === true || isResilientStore(store)) return store;
  if (resilience !== undefined) return resilientStore(store, resilience);
  let guarded = defaultResilient.get(store);
  if (guarded === undefined) defaultResilient.set(store, guarded = resilientStore(store));
  return guarded;
}

/** How long a leased decision waits on a store call another decision made: the call's deadline (the default one when none is set). */
const waitMsOf = (resilience: false | ResilientStoreOptions | undefined): number =>
  typeof resilience === "object" && typeof resilience.timeoutMs === "number" ? resilience.timeoutMs : DEFAULT_TIMEOUT_MS;

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
  // Shadow policies and warnings wrap the plain limiter: without them, nothing of theirs is on its path.
  if (observes(o)) return observedLimiter(o, createRateLimiter);
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
  const kinds = unwrapStore(bare).kinds;
  const foreign = kinds === undefined ? undefined : policies.find((p) => !kinds.includes(p.kind));
  if (foreign !== undefined) {
    throw new FloodgateError(
      "INVALID_OPTION",
      `createRateLimiter(): policy "${foreign.name}" is of kind "${foreign.kind}", which the ${bare.name} store does not implement; it implements ${
        kinds!.join(", ")
      }. Use another store for it (the memory and Redis stores implement every kind).`,
    );
  }
  const store = guardedStore(bare, o.resilience);
  const clock = o.clock ?? Date.now;
  // The store gets its own unfrozen copy: optimized code reads a frozen array's elements through
  // a slower, generic path on every decision.
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
  const via: ReservationVia = {
    // A reservation's decision has cost 0: no charge (it is settled, not refunded).
    decide(result, reservation) {
      const decision = toDecision(result, 0);
      linkReservation(decision, reservation);
      return decision;
    },
    settle: (key, ref, actual) => typeof ref === "string" ? settleNow(key, ref, actual) : ref.settle(actual, clock()),
  };
  const reservationOf = (result: StoreResult, key: string, estimate: number, ref: string | HeldReservation): Reservation =>
    new ReservationImpl(result, via, result[0] === 1 ? ref : "", key, estimate);

  const toDecision = (result: StoreResult, cost: number): Decision =>
    single !== undefined ? new SingleDecision(result, single, cost) : new MultiDecision(result, policies, cost);
  const mapped = CONSUME_MAPPED in store ? store as unknown as ConsumeMapped : undefined;
  const mapDecision = single !== undefined
    ? (result: StoreResult, cost: number): Decision => singleDecision(result, single, cost)
    : toDecision;

  /** Synchronous store answers become decisions at once; remote ones when they arrive. */
  const decide = (result: MaybePromise<StoreResult>, cost: number): Decision | Promise<Decision> =>
    Array.isArray(result) ? toDecision(result, cost) : Promise.resolve(result).then((r) => toDecision(r, cost));
  // `null` options are no options, as `undefined` are (not a TypeError from reading `.cost`).
  const costOf = (options: LimitOptions | undefined): number => (options?.cost === undefined ? 1 : checkCost(options.cost));

  const leaseMs = o.leaseMs ?? DEFAULT_LEASE_MS;
  const leased: LeasedDecider | undefined =
    o.mode === "leased" && checkLeasable("createRateLimiter()", policies, leaseMs) && typeof unwrapStore(bare).lease === "function"
      ? leasedDecider({
        store,
        set,
        clock,
        ownsClock: bare.ownsClock === true,
        lifeMs: leaseMs,
        waitMs: waitMsOf(o.resilience),
        toDecision,
        setPending,
      })
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
        let result: MaybePromise<StoreResult>;
        if (mapped !== undefined) {
          // The resilient store makes the decision as the store's answer arrives: no promise more.
          const answer = mapped[CONSUME_MAPPED](set, key, cost, clock(), mapDecision);
          if (!Array.isArray(answer)) return answer as Promise<Decision>;
          result = answer as StoreResult;
        } else {
          result = store.consume(set, key, cost, clock());
        }
        if (!Array.isArray(result)) return Promise.resolve(decide(result, cost));
        if (single === undefined) return Promise.resolve(toDecision(result, cost));
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
      leased?.drop(key);
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
      leased?.drop(key);
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
        const ttlMs = options?.ttl === undefined ? defaultTtlMs : checkTtl(options.ttl, policies);
        if (store.reserve === undefined || store.settle === undefined) {
          throw new FloodgateError(
            "INVALID_ARGUMENT",
            `limiter.reserve(): the ${store.name} store does not implement reservations (its reserve and settle operations); every store of @floodgate/core does (see docs/writing-a-store.md).`,
          );
        }
        if (store.reserveHeld !== undefined) {
          const answer = store.reserveHeld(set, key, estimate, clock(), ttlMs);
          return Promise.resolve(
            Array.isArray(answer)
              ? reservationOf(answer, key, estimate, "")
              : reservationOf((answer as HeldReservation).result, key, estimate, answer as HeldReservation),
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
  keepInternals(limiter, { set, clock, bare, toDecision });
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
  return limiter;
}
