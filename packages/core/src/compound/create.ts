import { traitsOf } from "../algorithms/algorithm.ts";
import { describeValue, FloodgateError } from "../errors.ts";
import { checkActual, checkCost, checkEstimate, checkKey, holdsError } from "../limiter/checks.ts";
import { internalsOf, type LimiterInternals } from "../limiter/internals.ts";
import type { Decision, RateLimiter, Reservation } from "../limiter/types.ts";
import { unwrapStore } from "../stores/resilient-store.ts";
import { isThenable, type ManyCall, type RateLimitStore, type StoreResult } from "../stores/store.ts";
import { compoundDecision, dimensionOf } from "./decision.ts";
import { type Dimension, limitOrdered, reserveOrdered } from "./ordered.ts";
import type {
  CompoundCharge,
  CompoundDecision,
  CompoundKeys,
  CompoundLimiter,
  CompoundLimiterOptions,
  CompoundReservation,
} from "./types.ts";

/** Whether `v` has a limiter's operations (one made by createRateLimiter, plain or observed). */
const isLimiter = (v: unknown): v is RateLimiter =>
  typeof v === "object" && v !== null &&
  ["limit", "decide", "peek", "refund", "reserve", "settle", "flush"].every((m) => typeof (v as Record<string, unknown>)[m] === "function");

/** Most dimensions of one compound limiter. */
export const MAX_DIMENSIONS = 16;

const WHERE = "createCompoundLimiter()";

function invalid(what: string): never {
  throw new FloodgateError("INVALID_OPTION", `${WHERE}: invalid option \`dimensions\`: ${what}`);
}

/**
 * Creates a limiter over several dimensions, each a limiter with its own policies and key: a
 * request is admitted only when every dimension admits it, and is then charged to every one; a
 * denial charges none. On one memory store, or one Redis or Upstash database, the whole decision
 * is one atomic store step (one script call); elsewhere the dimensions are charged one by one and
 * given back on a refusal, never admitting what any dimension refuses (docs/compound-limits.md).
 *
 * @param options.dimensions - the limiters, by dimension name
 * @example
 * const store = memoryStore();
 * const quotas = createCompoundLimiter({
 *   dimensions: {
 *     user: createRateLimiter({ policy: slidingWindow({ limit: 100, window: "1m" }), store, prefix: "user:" }),
 *     org: createRateLimiter({ policy: fixedWindow({ limit: 10_000, window: "1d" }), store, prefix: "org:" }),
 *   },
 * });
 * const decision = await quotas.limit({ user: "u42", org: "acme" });
 * if (!decision.allowed) console.log(`${decision.dimension} is over its limit`);
 */
export function createCompoundLimiter<D extends string>(options: CompoundLimiterOptions<D>): CompoundLimiter<D> {
  return compoundLimiter(options) as unknown as CompoundLimiter<D>;
}

/** The limiter, over dimension names as plain strings (the public type narrows them). */
function compoundLimiter<D extends string>(options: CompoundLimiterOptions<D>): CompoundLimiter<string> {
  if (typeof options !== "object" || options === null || Array.isArray(options)) {
    throw new FloodgateError(
      "INVALID_OPTION",
      `${WHERE}: expected an options object, received ${describeValue(options)}. Accepted options: dimensions.`,
    );
  }
  for (const name in options) {
    if (name !== "dimensions") {
      throw new FloodgateError("INVALID_OPTION", `${WHERE}: unknown option \`${name}\`; accepted options: dimensions.`);
    }
  }
  const given = options.dimensions as Readonly<Record<string, RateLimiter>> | undefined;
  if (typeof given !== "object" || given === null || Array.isArray(given)) {
    invalid(`received ${describeValue(given)}; expected an object of limiters made by createRateLimiter(), by dimension name.`);
  }
  const names = Object.keys(given);
  if (names.length < 1 || names.length > MAX_DIMENSIONS) invalid(`received ${names.length} dimensions; expected 1 to ${MAX_DIMENSIONS}.`);
  const dims: Dimension[] = [];
  const internals: (LimiterInternals | undefined)[] = [];
  for (const name of names) {
    const limiter = given[name]!;
    const inner = typeof limiter === "object" && limiter !== null ? internalsOf(limiter) : undefined;
    // A limiter with shadow policies or `warnAt` makes its own decisions: it is decided on the
    // one-by-one path, through its own calls.
    if (inner === undefined && !isLimiter(limiter)) {
      invalid(`dimension "${name}" is ${describeValue(limiter)}; expected a limiter made by createRateLimiter().`);
    }
    if (limiter.mode !== "exact") {
      invalid(
        `dimension "${name}" is a leased limiter; a compound decision charges every dimension exactly: use mode "exact" (the default).`,
      );
    }
    dims.push({ name, limiter });
    internals.push(inner);
  }
  const holding = dims.flatMap((d) => d.limiter.policies).find((p) => traitsOf(p).holdsUnits);
  // One store step when every dimension is on one store that has one (called through the first
  // dimension's resilience, when the limiters wrap it each in their own).
  const store: RateLimitStore = dims[0]!.limiter.store;
  const bare = internals[0]?.bare;
  const native = bare !== undefined && internals.every((i) => i?.bare === bare) && typeof unwrapStore(store).consumeMany === "function";
  const clock = internals[0]?.clock ?? Date.now;
  const storeOf = (i: number): RateLimitStore => internals[i]?.bare ?? unwrapStore(dims[i]!.limiter.store);

  const keysOf = (keys: CompoundKeys<D>): Record<string, string> => {
    if (typeof keys !== "object" || keys === null) {
      throw new FloodgateError(
        "INVALID_ARGUMENT",
        `Invalid keys: received ${describeValue(keys)}; expected an object with a key for every dimension (${names.join(", ")}).`,
      );
    }
    const out: Record<string, string> = {};
    for (const name in keys) {
      if (!Object.hasOwn(given, name)) {
        throw new FloodgateError(
          "INVALID_ARGUMENT",
          `Invalid keys: \`${name}\` is no dimension of this limiter; its dimensions are ${names.join(", ")}.`,
        );
      }
    }
    for (let i = 0; i < dims.length; i++) {
      const name = dims[i]!.name;
      const key = (keys as Record<string, unknown>)[name];
      if (key === undefined) {
        throw new FloodgateError(
          "INVALID_ARGUMENT",
          `Invalid keys: no key for dimension \`${name}\`; every dimension (${names.join(", ")}) needs one.`,
        );
      }
      checkKey(key);
      // Two dimensions on one store, prefix and key would share state: refused, not double-charged.
      for (let j = 0; j < i; j++) {
        if (storeOf(j) === storeOf(i) && dims[j]!.limiter.prefix === dims[i]!.limiter.prefix && out[dims[j]!.name] === key) {
          throw new FloodgateError(
            "INVALID_ARGUMENT",
            `Invalid keys: dimensions \`${
              dims[j]!.name
            }\` and \`${name}\` name the same key "${key}" under the same prefix and store; give each dimension its own prefix.`,
          );
        }
      }
      out[name] = key as string;
    }
    return out;
  };

  /** The native step's answers as a decision. */
  const fromStore = (results: readonly StoreResult[], keys: Record<string, string>, cost: number): CompoundDecision => {
    let allowed = true;
    const decisions: Decision[] = [];
    for (let i = 0; i < dims.length; i++) {
      const d = internals[i]!.toDecision(results[i]!, cost);
      if (d.charge === undefined) allowed = false;
      decisions.push(d);
    }
    const charge: CompoundCharge | undefined = allowed ? chargeOf(keys, cost, decisions) : undefined;
    return compoundDecision(decisions.map((d, i) => dimensionOf(dims[i]!.name, keys[dims[i]!.name]!, d)), allowed, charge, "store");
  };

  const chargeOf = (keys: Record<string, string>, cost: number, decisions: readonly Decision[]): CompoundCharge => {
    const marks: Record<string, readonly number[]> = {};
    for (let i = 0; i < dims.length; i++) marks[dims[i]!.name] = decisions[i]!.charge!.marks;
    return { cost, keys, marks };
  };

  const ordered = async (keys: Record<string, string>, cost: number): Promise<CompoundDecision> => {
    const o = await limitOrdered(dims, keys, cost);
    return compoundDecision(o.all, o.allowed, o.allowed ? chargeOf(keys, cost, o.held) : undefined, "store");
  };

  const limit = (keys: CompoundKeys<D>, options?: { cost?: number }): Promise<CompoundDecision> => {
    try {
      if (holding !== undefined) throw holdsError(holding);
      const k = keysOf(keys);
      const cost = options?.cost === undefined ? 1 : checkCost(options.cost);
      if (!native) return ordered(k, cost);
      const calls: ManyCall[] = dims.map((d, i) => ({ set: internals[i]!.set, key: k[d.name]! }));
      const answer = store.consumeMany!(calls, cost, clock());
      if (!isThenable(answer)) return Promise.resolve(answer === undefined ? ordered(k, cost) : fromStore(answer, k, cost));
      return answer.then((results) => (results === undefined ? ordered(k, cost) : fromStore(results, k, cost)));
    } catch (error) {
      return Promise.reject(error);
    }
  };

  const reservationOf = (
    keys: Record<string, string>,
    estimate: number,
    all: Parameters<typeof compoundDecision>[0],
    allowed: boolean,
    held: readonly Reservation[],
  ): CompoundReservation => {
    let done: Promise<boolean> | undefined;
    const settle = (actual: number): Promise<boolean> => {
      try {
        checkActual(actual);
      } catch (error) {
        return Promise.reject(error);
      }
      if (held.length === 0) return Promise.resolve(false);
      if (done !== undefined) return done.then(() => false);
      const call = Promise.all(held.map((r) => r.settle(actual))).then((answers) => answers.every(Boolean));
      done = call;
      call.catch(() => {
        if (done === call) done = undefined;
      });
      return call;
    };
    const pending = (): Promise<void> => Promise.all(held.map((r) => r.decision.pending)).then(() => undefined);
    const ids: Record<string, string> = {};
    for (let i = 0; i < held.length; i++) ids[dims[i]!.name] = held[i]!.id;
    return Object.freeze({
      decision: compoundDecision(all, allowed, undefined, "store", held.length === 0 ? undefined : pending()),
      ids: Object.freeze(ids),
      keys: Object.freeze(keys),
      estimate,
      settle,
      cancel: () => settle(0),
    });
  };

  return Object.freeze({
    dimensions: given as Readonly<Record<D, RateLimiter>>,
    path: native ? "store" : "ordered",
    limit,
    async peek(keys: CompoundKeys<D>): Promise<CompoundDecision> {
      const k = keysOf(keys);
      const read = await Promise.all(dims.map((d) => d.limiter.peek(k[d.name]!)));
      const all = read.map((d, i) => dimensionOf(dims[i]!.name, k[dims[i]!.name]!, d));
      return compoundDecision(all, all.every((d) => d.allowed), undefined, "store");
    },
    async refund(charge: CompoundCharge, options?: { cost?: number }): Promise<void> {
      const c = charge as Partial<CompoundCharge> | null;
      if (
        typeof c !== "object" || c === null || typeof c.keys !== "object" || c.keys === null || typeof c.marks !== "object" ||
        c.marks === null || !names.every((n) => typeof c.keys![n] === "string" && Array.isArray(c.marks![n]))
      ) {
        throw new FloodgateError(
          "INVALID_ARGUMENT",
          `Invalid compound charge: received ${
            describeValue(charge)
          }; expected the \`charge\` of an admitted decision of this compound limiter, as it was returned.`,
        );
      }
      const cost = options?.cost === undefined ? undefined : checkCost(options.cost);
      await Promise.all(dims.map((d) => d.limiter.refund(c.keys![d.name]!, { charge: { cost: c.cost!, marks: c.marks![d.name]! }, cost })));
    },
    async reserve(keys: CompoundKeys<D>, options: { estimate?: number; ttl?: number | string } = {}): Promise<CompoundReservation> {
      const k = keysOf(keys);
      const estimate = options?.estimate === undefined ? 1 : checkEstimate(options.estimate);
      const o = await reserveOrdered(dims, k, options ?? {});
      return reservationOf(k, estimate, o.all, o.allowed, o.held);
    },
    async settle(keys: CompoundKeys<D>, options: { ids: Readonly<Record<string, string>>; actual: number }): Promise<boolean> {
      const k = keysOf(keys);
      const ids = options?.ids;
      if (typeof ids !== "object" || ids === null || !names.every((n) => typeof ids[n] === "string")) {
        throw new FloodgateError(
          "INVALID_ARGUMENT",
          `Invalid ids: received ${describeValue(ids)}; expected the \`ids\` of a compound reservation, one per dimension (${
            names.join(", ")
          }).`,
        );
      }
      const actual = checkActual(options.actual);
      const answers = await Promise.all(dims.map((d) => d.limiter.settle(k[d.name]!, { id: ids[d.name]!, actual })));
      return answers.every(Boolean);
    },
    async flush(): Promise<void> {
      await Promise.all(dims.map((d) => d.limiter.flush()));
    },
  });
}
