import { FIELDS_PER_POLICY, traitsOf } from "../../algorithms/algorithm.ts";
import { describeValue, FloodgateError } from "../../errors.ts";
import { hasMethods, type OptionSpecs, parseOptions, whole } from "../../validation.ts";
import {
  answeredLocally,
  type CallSignal,
  isThenable,
  type LeaseRequest,
  type ManyCall,
  type MaybePromise,
  type PolicySet,
  type RateLimitStore,
  SENT_AT,
  type StoreResult,
} from "../store.ts";
import { DenyCache } from "./denials.ts";

/** Options of {@link withDenyCache}. */
export interface DenyCacheOptions {
  /** Most identifiers the cache holds; the oldest goes first (default 10,000). */
  maxKeys?: number;
}

/** A store wrapped by {@link withDenyCache}: the store's operations, plus the cache's size and disposal. */
export interface DenyCachedStore extends RateLimitStore {
  /** Whether the wrapped store reads time itself (then the cache measures waits on a monotonic clock). */
  readonly ownsClock: boolean;
  /** The wrapped store. */
  readonly inner: RateLimitStore;
  /** Identifiers currently in the cache. */
  readonly deniedKeys: number;
  /** Clears the cache, then disposes of the wrapped store (when it has `dispose`). */
  dispose(): MaybePromise<void>;
}

/** What the cache needs of a policy set, computed once per set. */
interface Prepared {
  /** The set's number in the cache: an entry answers only the set it was denied for. */
  readonly id: number;
  readonly count: number;
  readonly limits: readonly number[];
  /** False when a policy's units come back as holders settle, in any process (see `cachesDenials`). */
  readonly cacheable: boolean;
}

const isStore = /* @__PURE__ */ hasMethods("consume", "peek", "refund", "reset");

const OPTIONAL = ["reserve", "settle", "lease", "penalty", "block", "unblock", "reconnect", "consumeMany"] as const;

const OPTIONS: OptionSpecs = {
  maxKeys: [/* @__PURE__ */ whole(1, 10_000_000), "a whole number from 1 to 10000000 (default 10000)"],
};

// Chosen once.
const monotonic: () => number =
  /* @__PURE__ */ (() => typeof globalThis.performance?.now === "function" ? () => globalThis.performance.now() : () => Date.now())();

/** The cache's name for a key of a set: unique, as a prefix contains no `{`. Sets sharing a prefix share the key's state. */
const idOf = (set: PolicySet, key: string): string => `${set.prefix}{${key}}`;

/**
 * The signal the cache hands a store that notes denials itself (`notesDenials`): the caller's
 * `aborted`, and `denied(result)`, which remembers the denial unless a refund or reset of this
 * process was sent after the call.
 */
class DenialNote implements CallSignal {
  // Public fields set in the constructor, not private ones: one is made per call, and a class
  // with private fields runs an initializer for them on every construction.
  declare readonly signal: CallSignal | undefined;
  declare readonly cache: DenyCache;
  declare readonly prepared: Prepared;
  declare readonly set: PolicySet;
  declare readonly key: string;
  declare readonly cost: number;
  declare readonly sentAt: number;
  declare readonly generation: number;

  constructor(
    signal: CallSignal | undefined,
    cache: DenyCache,
    prepared: Prepared,
    set: PolicySet,
    key: string,
    cost: number,
    sentAt: number,
  ) {
    this.signal = signal;
    this.cache = cache;
    this.prepared = prepared;
    this.set = set;
    this.key = key;
    this.cost = cost;
    this.sentAt = sentAt;
    // A refund or reset sent while this call is in flight may run after it in the store.
    this.generation = cache.generation;
  }

  get aborted(): boolean {
    return this.signal?.aborted === true;
  }

  denied(result: StoreResult): void {
    this.signal?.denied?.(result);
    if (this.cache.generation === this.generation) {
      remember(this.cache, this.prepared, this.set, this.key, this.cost, this.sentAt, result);
    }
  }
}

/**
 * Remembers a denial's figures (a lease answer's tail dropped). `maxMs`, a lease call's: units
 * of outstanding leases may come back before the denial's wait is over, so the denial is kept
 * no longer than a lease lives.
 */
function remember(
  cache: DenyCache,
  prepared: Prepared,
  set: PolicySet,
  key: string,
  cost: number,
  sentAt: number,
  result: StoreResult,
  maxMs?: number,
): void {
  const figures = 1 + prepared.count * FIELDS_PER_POLICY;
  const denial = result.length > figures ? result.slice(0, figures) : result;
  cache.remember(idOf(set, key), prepared.id, cost, sentAt, denial, prepared.limits, maxMs);
}

/**
 * Wraps a store in a deny cache: an identifier the store denied is denied again locally, with no
 * store call, for as long as the store is certain to deny it too (its `retryAfterMs`, counted
 * from when the denied call was sent). Worth it where a store call is a round trip: a client
 * hammering a limit then costs the backend nothing. The built-in Redis stores wrap themselves
 * (their `denyCache` option).
 *
 * Exact for this process: its own `refund`, `reset`, `settle`, `penalty`, `block` and `unblock`
 * (through the wrapper) clear the identifier's entry, and a denial in flight across one of them
 * is not remembered. Another process's refund or reset is not seen: until the denial's wait is
 * over, this process may deny what the store would admit again (never the reverse). A set with a
 * policy whose units come back as holders settle (concurrency) is never cached; a lease call that
 * gives units back is always sent, and a lease denial is remembered at most for the lease's life.
 * Waits are measured on the limiter's time, or on a monotonic clock when the store owns its clock.
 *
 * @param store - the store to wrap
 * @param options.maxKeys - most identifiers held, oldest out first (default 10,000)
 * @example
 * const store = withDenyCache(myKvStore, { maxKeys: 50_000 });
 * const limiter = createRateLimiter({ policy: fixedWindow({ limit: 100, window: "1m" }), store });
 */
export function withDenyCache(store: RateLimitStore, options: DenyCacheOptions = {}): DenyCachedStore {
  const o = parseOptions<DenyCacheOptions>(options, "withDenyCache()", OPTIONS);
  if (!isStore(store)) {
    throw new FloodgateError(
      "INVALID_ARGUMENT",
      `withDenyCache(): received ${describeValue(store)} as the store; expected a store (an object with consume, peek, refund and reset).`,
    );
  }
  return denyCached(store, o.maxKeys ?? 10_000);
}

/** {@link withDenyCache} without the checks, for stores of this package. */
export function denyCached(store: RateLimitStore, maxKeys: number): DenyCachedStore {
  const wrapped = new DenyCacheStore(store, maxKeys);
  // An operation the store lacks stays absent, so the limiter sees what the store can do.
  for (const op of OPTIONAL) {
    if (typeof store[op] !== "function") Object.defineProperty(wrapped, op, { value: undefined });
  }
  return wrapped;
}

class DenyCacheStore implements DenyCachedStore {
  readonly name: string;
  readonly ownsClock: boolean;
  readonly synchronous?: boolean;
  readonly inner: RateLimitStore;
  readonly #cache: DenyCache;
  readonly #sets = new WeakMap<PolicySet, Prepared>();
  #lastSet: PolicySet | undefined = undefined;
  #lastPrepared: Prepared | undefined = undefined;
  /** Whether the inner store tells of its denials itself; the wrapper then does too. */
  readonly notesDenials?: boolean;
  #nextId = 1;

  constructor(inner: RateLimitStore, maxKeys: number) {
    this.inner = inner;
    if (inner.notesDenials === true) this.notesDenials = true;
    this.name = inner.name;
    this.ownsClock = inner.ownsClock === true;
    // The wrapper adds no waiting: a store that answers synchronously still does.
    if (inner.synchronous === true) this.synchronous = true;
    this.#cache = new DenyCache(maxKeys);
  }

  get deniedKeys(): number {
    return this.#cache.size;
  }

  consume(set: PolicySet, key: string, cost: number, nowMs: number, signal?: CallSignal): MaybePromise<StoreResult> {
    const prepared = this.#preparedOf(set);
    if (!prepared.cacheable) return this.inner.consume(set, key, cost, nowMs, signal);
    const cache = this.#cache;
    // The resilient store around this one has read the clock as it sent the call.
    const sentAt = this.ownsClock ? ((signal as { [SENT_AT]?: number } | undefined)?.[SENT_AT] ?? monotonic()) : nowMs;
    if (cache.size > 0) {
      const hit = cache.check(idOf(set, key), prepared.id, cost, sentAt);
      if (hit !== undefined) {
        signal?.denied?.(hit);
        return hit;
      }
    }
    if (this.notesDenials === true) {
      return this.inner.consume(set, key, cost, nowMs, new DenialNote(signal, cache, prepared, set, key, cost, sentAt));
    }
    // A refund or reset sent while this call is in flight may run after it in the store.
    const generation = cache.generation;
    const answer = this.inner.consume(set, key, cost, nowMs, signal);
    if (isThenable(answer)) return this.#remembering(answer, prepared, set, key, cost, sentAt, generation);
    if (answer[0] === 0) this.#remember(prepared, set, key, cost, sentAt, answer);
    return answer;
  }

  peek(set: PolicySet, key: string, nowMs: number, signal?: CallSignal): MaybePromise<StoreResult> {
    return this.inner.peek(set, key, nowMs, signal);
  }

  /** Sent as it is: a compound step charges, and a charge makes no cached denial wrong. */
  consumeMany(
    calls: readonly ManyCall[],
    cost: number,
    nowMs: number,
    signal?: CallSignal,
  ): MaybePromise<readonly StoreResult[] | undefined> {
    return this.inner.consumeMany!(calls, cost, nowMs, signal);
  }

  refund(set: PolicySet, key: string, cost: number, nowMs: number, marks?: readonly number[]): MaybePromise<void> {
    return this.#forgetting(set, key, () => this.inner.refund(set, key, cost, nowMs, marks));
  }

  reserve(
    set: PolicySet,
    key: string,
    cost: number,
    nowMs: number,
    id: string,
    ttlMs: number,
    signal?: CallSignal,
  ): MaybePromise<StoreResult> {
    const inner = this.inner;
    const prepared = this.#preparedOf(set);
    if (!prepared.cacheable) return inner.reserve!(set, key, cost, nowMs, id, ttlMs, signal);
    const cache = this.#cache;
    const sentAt = this.ownsClock ? monotonic() : nowMs;
    if (cache.size > 0) {
      const hit = cache.check(idOf(set, key), prepared.id, cost, sentAt);
      if (hit !== undefined) return hit;
    }
    const generation = cache.generation;
    const answer = inner.reserve!(set, key, cost, nowMs, id, ttlMs, signal);
    if (isThenable(answer)) return this.#remembering(answer, prepared, set, key, cost, sentAt, generation);
    if (answer[0] === 0) this.#remember(prepared, set, key, cost, sentAt, answer);
    return answer;
  }

  settle(set: PolicySet, key: string, id: string, actual: number, nowMs: number): MaybePromise<boolean> {
    return this.#forgetting(set, key, () => this.inner.settle!(set, key, id, actual, nowMs));
  }

  /**
   * A leased decision. A call giving units back is always sent: they may admit this very request,
   * and would sit idle until the next call. A hit is padded to the lease answer's length with a
   * zero grant, life and time (the zero time tells a leased limiter the answer was local).
   */
  lease(set: PolicySet, key: string, request: LeaseRequest, nowMs: number, signal?: CallSignal): MaybePromise<StoreResult> {
    const inner = this.inner;
    const prepared = this.#preparedOf(set);
    if (!prepared.cacheable || !(request.cost > 0)) return inner.lease!(set, key, request, nowMs, signal);
    const cache = this.#cache;
    const sentAt = this.ownsClock ? monotonic() : nowMs;
    if (cache.size > 0 && !givesBack(request)) {
      const hit = cache.check(idOf(set, key), prepared.id, request.cost, sentAt);
      if (hit !== undefined) {
        const padded = hit.slice();
        for (let n = prepared.count + 3; n > 0; n--) padded.push(0);
        return answeredLocally(padded, "cache");
      }
    }
    const generation = cache.generation;
    const answer = inner.lease!(set, key, request, nowMs, signal);
    if (isThenable(answer)) return this.#remembering(answer, prepared, set, key, request.cost, sentAt, generation, request.lifeMs);
    if (answer[0] === 0) this.#remember(prepared, set, key, request.cost, sentAt, answer, request.lifeMs);
    return answer;
  }

  reset(set: PolicySet, key: string): MaybePromise<void> {
    return this.#forgetting(set, key, () => this.inner.reset(set, key));
  }

  penalty(set: PolicySet, key: string, cost: number, nowMs: number): MaybePromise<void> {
    // A penalty or a block only lengthens a denial: forgotten so that the next answer shows it.
    return this.#forgetting(set, key, () => this.inner.penalty!(set, key, cost, nowMs));
  }

  block(set: PolicySet, key: string, durationMs: number, nowMs: number): MaybePromise<void> {
    return this.#forgetting(set, key, () => this.inner.block!(set, key, durationMs, nowMs));
  }

  unblock(set: PolicySet, key: string): MaybePromise<void> {
    return this.#forgetting(set, key, () => this.inner.unblock!(set, key));
  }

  dispose(): MaybePromise<void> {
    this.#cache.clear();
    return this.inner.dispose?.();
  }

  reconnect(): MaybePromise<void> {
    return this.inner.reconnect?.();
  }

  /**
   * Awaits a call that may be denied and remembers its denial unless a `forget` came meanwhile.
   * An async function: the one promise and hop a `.then` would take, without a closure.
   */
  async #remembering(
    answer: Promise<StoreResult>,
    prepared: Prepared,
    set: PolicySet,
    key: string,
    cost: number,
    sentAt: number,
    generation: number,
    maxMs?: number,
  ): Promise<StoreResult> {
    const result = await answer;
    if (result[0] === 0 && this.#cache.generation === generation) this.#remember(prepared, set, key, cost, sentAt, result, maxMs);
    return result;
  }

  #remember(prepared: Prepared, set: PolicySet, key: string, cost: number, sentAt: number, result: StoreResult, maxMs?: number): void {
    remember(this.#cache, prepared, set, key, cost, sentAt, result, maxMs);
  }

  /**
   * Runs an operation that may let the store admit again, forgetting the key's denial when it is
   * sent and again when it is done: a call sent meanwhile may have run before it in the store (on
   * another connection, in another HTTP request), and its denial, remembered or in flight,
   * predates the change.
   */
  #forgetting<T>(set: PolicySet, key: string, op: () => MaybePromise<T>): MaybePromise<T> {
    const id = idOf(set, key);
    const cache = this.#cache;
    cache.forget(id);
    let answer: MaybePromise<T>;
    try {
      answer = op();
    } catch (error) {
      cache.forget(id);
      throw error;
    }
    if (!isThenable(answer)) {
      cache.forget(id);
      return answer;
    }
    return forgetAfter(answer, cache, id);
  }

  /** The set's figures: the last set's kept at hand (a limiter calls with one set), others in a WeakMap. */
  #preparedOf(set: PolicySet): Prepared {
    if (set === this.#lastSet) return this.#lastPrepared!;
    const prepared = this.#sets.get(set) ?? this.#prepare(set);
    this.#lastSet = set;
    this.#lastPrepared = prepared;
    return prepared;
  }

  #prepare(set: PolicySet): Prepared {
    const prepared: Prepared = Object.freeze({
      id: this.#nextId++,
      count: set.policies.length,
      limits: Object.freeze(set.policies.map((p) => p.limit)),
      cacheable: set.policies.every((p) => traitsOf(p).cachesDenials),
    });
    this.#sets.set(set, prepared);
    return prepared;
  }
}

async function forgetAfter<T>(answer: Promise<T>, cache: DenyCache, id: string): Promise<T> {
  try {
    return await answer;
  } finally {
    cache.forget(id);
  }
}

const givesBack = (request: LeaseRequest): boolean => request.returns?.some((r) => r.unspent > 0) === true;
