import type { Policy } from "../policy.ts";

/*
 * What every algorithm is made of. Each kind lives in one file of this folder (its policy
 * factory, its TypeScript `apply`/`refund`, its Lua fragments, its documented figures) and is
 * listed once in registry.ts.
 *
 * The TypeScript side is the specification the Redis Lua scripts mirror operation for operation:
 * every time is an integer number of microseconds and every quantity an integer, so doubles
 * compute them exactly in JavaScript and in Lua alike and every store reaches identical decisions.
 *
 * A decision writes four numbers per policy into `out` at `i`:
 *   out[i]     1 when this policy alone would admit `cost`, else 0
 *   out[i + 1] remaining (after consuming, when charged; else as things stand)
 *   out[i + 2] resetAt, epoch ms
 *   out[i + 3] retryAfterMs: 0 when admitted, NEVER (-1) when `cost` exceeds the limit
 */

/** `retryAfterMs` sentinel in store results: the cost exceeds the policy's limit. */
export const NEVER = -1;

/** The outcome of one policy in a store result: four numbers per policy after the leading flag. */
export const FIELDS_PER_POLICY = 4;

/**
 * What a kind can do, declared once on its algorithm (and so on its registry definition): the
 * limiter, the stores, the deny cache and the headers read these and never a kind's name.
 */
export interface AlgorithmTraits {
  /**
   * How leased mode treats a set containing this kind; `undefined`: such a set is always decided
   * exactly (a sliding log writes an entry per unit anyway; a concurrency unit is held, not spent).
   */
  readonly lease: LeaseTraits | undefined;
  /**
   * Whether an admitted request holds a unit until its reservation is settled (a concurrency
   * limit): such a set is decided through `reserve()`, never `limit()`, and reported as units in
   * flight rather than per window.
   */
  readonly holdsUnits: boolean;
  /**
   * Whether a denial may be answered from a deny cache until its retry time. Not when units come
   * back as their holders settle (in any process), long before the wait a denial reports.
   */
  readonly cachesDenials: boolean;
}

/** See {@link AlgorithmTraits.lease}. */
export interface LeaseTraits {
  /**
   * Units kept out of reach of every leased decision, so that leases outstanding for `lifeMs`
   * never let the set admit what an exact decision would refuse (a token bucket refills while a
   * lease lives: what it refills in `lifeMs`); 0 for the window kinds.
   */
  reserve(p: Policy, lifeMs: number): number;
  /**
   * Whether charges go into windows of `windowMs` aligned to the epoch, so that a lease cannot
   * outlive the window it was charged in (false for a token bucket, charged into no period).
   */
  readonly windowed: boolean;
}

/**
 * The part of an algorithm a policy carries (under the `ALGORITHM` symbol) and the TypeScript stores
 * run: its state layout and its two operations. A key's state for one policy is `width` numbers
 * of a Float64Array starting at `o`, plus, when `keepsLog` is set, one growable array of numbers.
 */
export interface Algorithm {
  /** What this kind can do (see {@link AlgorithmTraits}). */
  readonly traits: AlgorithmTraits;
  /** Numbers of state per key (the first is the log's reference when the algorithm keeps a log). */
  readonly width: number;
  /** Whether the state includes an array of timestamps (the stores hand it to `apply`/`refund` as `log`). */
  readonly keepsLog: boolean;
  /**
   * Decides whether `cost` fits, writes this policy's four figures at `out[i]` and, when it fits
   * and `charge` is set, applies it (the figures are then those after consuming). Returns the
   * state's expiry in µs, meaningful once charged. A denial never changes what the state means
   * (it may tidy it, as the sliding log drops entries that have left the window).
   */
  apply(
    p: Policy,
    s: Float64Array,
    o: number,
    log: number[] | undefined,
    nowUs: number,
    cost: number,
    out: number[],
    i: number,
    charge: boolean,
  ): number;
  /**
   * Optional: a leased call's decision when it differs from `apply` with a cost of `req + granted`
   * (the Lua `grant` fragment's twin): `req` units spent now and a lease of `granted` units spent
   * until `endUs`. Writes the four figures at `out[i]` as `apply` does and, when it fits and
   * `charge` is set, charges it; returns the state's expiry in µs. See the token bucket's.
   */
  grant?(
    p: Policy,
    s: Float64Array,
    o: number,
    log: number[] | undefined,
    nowUs: number,
    req: number,
    granted: number,
    endUs: number,
    out: number[],
    i: number,
    charge: boolean,
  ): number;
  /**
   * The mark of the charge `apply` has just made (read from the state it left): what this
   * admission went into, so that a late refund gives back into that and nothing else. An integer.
   * Absent: the state's first number (see {@link markOf}).
   */
  mark?(p: Policy, s: Float64Array, o: number, log: number[] | undefined): number;
  /**
   * Gives back up to `cost` units, never below an empty state; returns the expiry in µs. With a
   * `mark` (from {@link Algorithm.mark}) only into what that charge went into, and nothing when
   * that no longer applies: the state after the refund is never below the state the algorithm
   * would hold had the refunded request never been made, so every admission kept is one the
   * algorithm admits without it. Without a mark, into the current state (manual corrections).
   */
  refund(p: Policy, s: Float64Array, o: number, log: number[] | undefined, nowUs: number, cost: number, mark: number | undefined): number;
  /**
   * Settles a reservation charged `estimate` into `mark`: its true cost is `actual`. Returns the
   * expiry in µs. The window and bucket kinds give `estimate − actual` back into the mark (as
   * `refund` does) or charge `actual − estimate` into it, past the limit (see {@link overcharge});
   * a kind that holds units while a request is in flight (concurrency) releases them.
   */
  settle(
    p: Policy,
    s: Float64Array,
    o: number,
    log: number[] | undefined,
    nowUs: number,
    estimate: number,
    actual: number,
    mark: number,
  ): number;
  /**
   * Whether a state read from outside (a store's serialized value) is one this algorithm can
   * have written: `apply` and `refund` may assume it. Every number is already known to be finite.
   */
  accepts(s: Float64Array, o: number, log: number[] | undefined): boolean;
  /**
   * Optional, for a kind whose windows differ in length (a calendar window's days, weeks and
   * months): the length in ms of the window that ends at `resetAt` (epoch ms), which the
   * `RateLimit-Policy` header reports. Absent: every window is `windowMs` long.
   */
  windowMsAt?(p: Policy, resetAt: number): number;
}

/**
 * The Lua fragments of a kind: decide (sets ok, a..e), commit (reads a..e, writes the
 * charge's mark to out[j]), refund (into the mark m, or into the current state when m is nil),
 * settle (a reservation of `est` units charged into the mark m costs `act`; see
 * stores/redis/reservation-lua.ts). See stores/redis/lua.ts.
 */
export interface LuaFragments {
  /** Decides one policy: sets `ok` and hands commit its state in `a`..`e`. */
  readonly eval: string;
  /** Charges what eval decided and writes the charge's mark to `out[j]`. */
  readonly commit: string;
  /** Gives `cost` back into the mark `m` (into the current state when `m` is nil). */
  readonly refund: string;
  /** Settles a reservation of `est` units charged into the mark `m` at its true cost `act`. */
  readonly settle: string;
  /**
   * The lease script's decision of a request (`req` units, spent now) plus a lease (`g` units, to
   * be spent until `wend`, µs), when it differs from `eval` with `cost = req + g`: see the token
   * bucket's.
   */
  readonly grant?: string;
}

/** The Redis side of an algorithm. */
export interface LuaAlgorithm {
  /** One letter, unique among the kinds: the multi-policy script dispatches on it. */
  readonly code: string;
  /** The Lua fragments the scripts paste in (see {@link LuaFragments}). */
  readonly fragments: LuaFragments;
  /** The number the script receives as P besides the limit (an integer). */
  parameter(p: Policy): number;
  /**
   * Optional: the parameter depends on the clock (a calendar window's boundaries around it), so
   * it is computed per call from the client's clock (`nowMs`) instead of once per policy set.
   */
  readonly parameterAt?: (p: Policy, nowMs: number) => number;
  /** Largest limit the Redis state represents exactly, when below the policy factory's own bound. */
  readonly maxLimit?: number;
  /**
   * Optional: the single-policy script's first step for a charge (pasted before the rest), and
   * how the store reads its short answer as the usual result of the charge, from the charge's
   * cost and the policy's limit and parameter. `source(true)` is the step of a script of its own
   * for a charge of 1 on the server's clock, whose ARGV are only the limit and parameter.
   */
  readonly fast?: {
    /** The step's Lua; `one`: for the script of a charge of 1 on the server's clock. */
    source(one: boolean): string;
    /**
     * The step's short answer as the script's usual result of a charge of `cost`; undefined for
     * a reply that is not such an answer (the store then checks it as a usual result).
     */
    expand(reply: unknown, cost: number, limit: number, parameter: number): number[] | undefined;
  };
  /**
   * Optional: what every script that starts a block on this kind's state key \`k\` also runs,
   * with the block's end (µs) in \`bu\` and the script's clock in \`now\`.
   */
  readonly blockMark?: string;
  /**
   * Optional, for a kind whose \`blockMark\` leaves a blocked key's state present and flagged
   * until the block ends (block-flag.ts): how its eval fragment's carried values show the flag. A
   * script that knows its first policy's state unflagged need not read the block key.
   */
  readonly flag?: {
    /** A Lua expression over what eval carries (a..e), true when the state read carried the flag. */
    readonly read: string;
    /** A Lua statement after which the commit writes the state without the flag. */
    readonly clear: string;
  };
}

/** The figures the docs show for a kind (the algorithm table of docs/reference/options.md, under "Policies"). */
export interface AlgorithmDocs {
  /** The factory call as the table shows it, e.g. `tokenBucket({ capacity, refillRate })`. */
  readonly call: string;
  /** What a key's state holds, in words. */
  readonly statePerKey: string;
  /** What the kind guarantees, in words. */
  readonly guarantee: string;
  /** What `resetAt` means for this kind. */
  readonly resetAt: string;
}

/**
 * One kind of policy as registry.ts lists it: what the Redis stores, the docs and the tests read
 * about it. It names its factory rather than holding it, and leaves the TypeScript `apply` and
 * `refund` to the policy (under the `ALGORITHM` symbol): the Redis stores import the registry, and a
 * bundle should carry only the factories it imports.
 */
export interface AlgorithmDefinition<K extends string = string> {
  /** The kind's name, as policies carry it. */
  readonly kind: K;
  /** What this kind can do: the same object its policies' algorithm carries. */
  readonly traits: AlgorithmTraits;
  /** The policy factory's name, as the package exports it, e.g. `"tokenBucket"`. */
  readonly factoryName: string;
  /** The Redis side of the kind. */
  readonly lua: LuaAlgorithm;
  /** The figures the docs show for the kind. */
  readonly docs: AlgorithmDocs;
  /**
   * Options of the factory for a policy admitting `limit` per `windowMs` (a bucket of `limit`
   * refilled over `windowMs`), named `name` when given: for tests, demos and docs.
   */
  exampleOptions(limit: number, windowMs: number, name?: string): object;
  /** The longest a key's state matters after the last charge: the most a store's TTL for it needs to be. */
  retentionMs(p: Policy): number;
}

/**
 * The mark of the charge `apply` has just made: the algorithm's `mark`, or the state's first
 * number when it has none (read here: a call per charged decision costs more than the read).
 */
export const markOf = (a: Algorithm, p: Policy, s: Float64Array, o: number, log: number[] | undefined): number =>
  a.mark === undefined ? s[o]! : a.mark(p, s, o, log);

/** Milliseconds, rounded up, of a µs time or duration. */
export const ceilMs = (us: number): number => Math.ceil(us / 1000);

/**
 * Where a policy keeps its algorithm: the policy factories set it, the memory store reads it. A
 * bundle then carries only the algorithms whose factories it imports. A registered symbol, so two
 * copies of this package in one program (its ESM and CJS builds, or a bundled and an installed
 * copy) accept each other's policies.
 */
export const ALGORITHM: unique symbol = /* @__PURE__ */ Symbol.for("floodgate.alg");

/** The algorithm of a policy built by a policy factory. */
export function algorithmOf(policy: Policy): Algorithm {
  return (policy as Policy & { readonly [ALGORITHM]: Algorithm })[ALGORITHM];
}

/** What a policy's kind can do (see {@link AlgorithmTraits}). */
export const traitsOf = (policy: Policy): AlgorithmTraits => algorithmOf(policy).traits;

/** The traits of a window kind: leased within its window, nothing held, denials cacheable. */
export const WINDOW_TRAITS: AlgorithmTraits = {
  lease: { reserve: () => 0, windowed: true },
  holdsUnits: false,
  cachesDenials: true,
};

/** Converts an epoch-ms clock reading into the integer µs the algorithms use. */
export function toMicros(nowMs: number): number {
  return Math.floor(nowMs * 1000);
}

/**
 * The settlement of the window and bucket kinds: the difference between the estimate charged
 * and the actual cost goes back into the mark (`refund`), or is charged into it (`overcharge`).
 */
export function settleByDifference(
  refund: Algorithm["refund"],
  overcharge: (p: Policy, s: Float64Array, o: number, log: number[] | undefined, nowUs: number, cost: number, mark: number) => number,
): Algorithm["settle"] {
  return (p, s, o, log, now, estimate, actual, mark) =>
    actual < estimate
      ? refund(p, s, o, log, now, estimate - actual, mark)
      : actual > estimate
      ? overcharge(p, s, o, log, now, actual - estimate, mark)
      : refund(p, s, o, log, now, 0, mark);
}

/**
 * The Lua settle fragment of the window and bucket kinds: the refund fragment with `cost` the
 * estimate less the actual cost, or the overcharge fragment (`over`) with `cost` the excess.
 * Reads `est` and `act`; `m` is the mark.
 */
export const settleFragment = (refund: string, over: string): string =>
  `if act < est then
cost = est - act
${refund}elseif act > est then
cost = act - est
${over}end
`;
