import {
  type CallSignal,
  type EvaluateMode,
  FloodgateError,
  type LeaseRequest,
  type ManyCall,
  type PolicySet,
  type RateLimitStore,
  type ReservationArgs,
  type StoreResult,
} from "@floodgate/core/store";
import { CommitQueues } from "./commits.ts";
import { kvKeyOf } from "./keys.ts";
import type { KvDatabase } from "./kv.ts";
import { consumeMany } from "./many.ts";

/** Options of {@link denoKvStore}. */
export interface DenoKvStoreOptions {
  /** The database: `await Deno.openKv()` (Deno, Deno Deploy), or `await openKv(path)` from @deno/kv on Node. */
  kv: KvDatabase;
  /** Key parts every key of this store starts with (strings); default `["floodgate"]`. */
  keyPrefix?: readonly string[];
  /**
   * Most commits one operation tries before it fails with `STORE_TIMEOUT` (a whole number from 1
   * to 1,000; default 50). Each lost race waits a random time first (up to 2, 4, ... 100 ms).
   */
  maxAttempts?: number;
  /** Longest one operation keeps retrying, ms (default 1,000): past it, `STORE_TIMEOUT` rather than another attempt. */
  timeoutMs?: number;
}

/** Counts of a {@link denoKvStore}'s work since it was created. */
export interface DenoKvStoreStats {
  /** Operations that wrote (or found nothing to write): decisions, refunds, blocks... */
  readonly operations: number;
  /** Atomic commits sent (each a paid write on Deno Deploy). */
  readonly commits: number;
  /** Commits refused because another writer changed the key first (each followed by a new attempt, or a timeout). */
  readonly retries: number;
  /** Operations that gave up with `STORE_TIMEOUT`. */
  readonly timeouts: number;
}

/** A {@link denoKvStore}: a store with counts of its commits and retries. */
export interface DenoKvStore extends RateLimitStore {
  /** What it has done so far. */
  stats(): DenoKvStoreStats;
  /** Every pair of a compound decision read together and committed in one atomic operation (see {@link RateLimitStore.consumeMany}). */
  consumeMany(calls: readonly ManyCall[], cost: number, nowMs: number, signal?: CallSignal): Promise<StoreResult[]>;
}

const OPTIONS = ["kv", "keyPrefix", "maxAttempts", "timeoutMs"];
function invalid(option: string, received: string, expected: string): FloodgateError {
  return new FloodgateError("INVALID_OPTION", `denoKvStore(): invalid option \`${option}\`: received ${received}; expected ${expected}.`);
}

function checked(options: DenoKvStoreOptions): Required<DenoKvStoreOptions> {
  if (typeof options !== "object" || options === null) throw invalid("options", String(options), "an object with `kv`");
  for (const name of Object.keys(options)) {
    if (!OPTIONS.includes(name)) {
      throw new FloodgateError("INVALID_OPTION", `denoKvStore(): unknown option \`${name}\`; accepted options: ${OPTIONS.join(", ")}.`);
    }
  }
  const { kv, keyPrefix = ["floodgate"], maxAttempts = 50, timeoutMs = 1000 } = options;
  if (typeof kv?.get !== "function" || typeof kv.atomic !== "function") {
    throw invalid(
      "kv",
      kv === undefined ? "undefined" : "an object without get() and atomic()",
      "a Deno KV database: await Deno.openKv(), or openKv() from @deno/kv",
    );
  }
  if (!Array.isArray(keyPrefix) || !keyPrefix.every((p) => typeof p === "string")) {
    throw invalid("keyPrefix", String(keyPrefix), 'an array of strings such as ["floodgate"]');
  }
  if (!(Number.isInteger(maxAttempts) && maxAttempts >= 1 && maxAttempts <= 1000)) {
    throw invalid("maxAttempts", String(maxAttempts), "a whole number from 1 to 1000");
  }
  if (!(Number.isFinite(timeoutMs) && timeoutMs > 0)) throw invalid("timeoutMs", String(timeoutMs), "a number of ms > 0");
  return { kv, keyPrefix, maxAttempts, timeoutMs };
}

/**
 * A store whose state lives in Deno KV. A decision reads the key's entry, decides every policy
 * of the set with `evaluateState`, and commits the new state only if the entry's versionstamp is
 * unchanged (one atomic commit for the whole set, written with `expireIn` so the key expires on
 * its own); a lost race waits a jittered, growing time and decides again, at most `maxAttempts`
 * times and never past `timeoutMs`, then fails with `STORE_TIMEOUT`. Calls on one key from this
 * store are decided together, in order, one commit per round: they never race each other. Decisions run on the
 * limiter's clock (Deno KV has none to offer). Every operation of the contract: several
 * policies atomically, refunds into their charge, reservations, leases (`mode: "leased"`),
 * blocks, penalties, reset, and compound decisions in one atomic commit over every key.
 *
 * @example
 * // createRateLimiter and slidingWindow come from "@floodgate/core".
 * import { denoKvStore } from "@floodgate/deno-kv";
 *
 * const limiter = createRateLimiter({ policy: slidingWindow({ limit: 100, window: "1m" }), store: denoKvStore({ kv: await Deno.openKv() }) });
 */
export function denoKvStore(options: DenoKvStoreOptions): DenoKvStore {
  const { kv, keyPrefix, maxAttempts, timeoutMs } = checked(options);
  const queues = new CommitQueues(kv, maxAttempts);
  const many = {
    kv,
    counts: queues.counts,
    maxAttempts,
    timeoutMs,
    keyOf: (call: ManyCall) => kvKeyOf(keyPrefix, call.set.prefix, call.key),
  };
  // Compound decisions of this store run one after another: they share keys (a global one) and
  // would otherwise lose races to each other; other processes' writes still make them retry.
  let compound: Promise<unknown> = Promise.resolve();

  function run(
    mode: EvaluateMode,
    set: PolicySet,
    key: string,
    cost: number,
    nowMs: number,
    marks?: readonly number[],
    reservation?: ReservationArgs,
    signal?: CallSignal,
    lease?: LeaseRequest,
  ): Promise<StoreResult> {
    return new Promise((resolve, reject) => {
      // JSON tells lone surrogates apart: the id of the key in this process's queues.
      queues.enqueue(JSON.stringify([set.prefix, key]), kvKeyOf(keyPrefix, set.prefix, key), {
        mode,
        set,
        key,
        cost,
        nowMs,
        marks,
        reservation,
        lease,
        signal,
        deadline: Date.now() + timeoutMs,
        resolve,
        reject,
      });
    });
  }

  return {
    name: "deno-kv",
    ownsClock: false,
    stats: () => ({ ...queues.counts }),
    consume: (set, key, cost, nowMs, signal) => run("consume", set, key, cost, nowMs, undefined, undefined, signal),
    peek: (set, key, nowMs, signal) => run("peek", set, key, 1, nowMs, undefined, undefined, signal),
    // A compound decision: every key read, one commit checking every versionstamp (many.ts).
    consumeMany: (calls, cost, nowMs, signal) => {
      const step = compound.then(() => consumeMany(many, calls, cost, nowMs, signal));
      compound = step.catch(() => undefined);
      return step;
    },
    refund: async (set, key, cost, nowMs, marks) => {
      await run("refund", set, key, cost, nowMs, marks);
    },
    reserve: (set, key, cost, nowMs, id, ttlMs, signal) => run("reserve", set, key, cost, nowMs, undefined, { id, ttlMs }, signal),
    // Leased mode: returns, the request and a new lease in one commit; a hot key then commits once per lease, not per request.
    lease: (set, key, request, nowMs, signal) => run("lease", set, key, 0, nowMs, undefined, undefined, signal, request),
    settle: async (set, key, id, actual, nowMs) => (await run("settle", set, key, 0, nowMs, undefined, { id, actual }))[0] === 1,
    reset: async (set, key) => {
      try {
        await kv.delete(kvKeyOf(keyPrefix, set.prefix, key));
      } catch (error) {
        throw new FloodgateError("STORE_ERROR", `Deno KV store: reset failed: ${(error as Error)?.message ?? String(error)}`, {
          cause: error,
        });
      }
    },
    penalty: async (set, key, cost, nowMs) => {
      await run("penalty", set, key, cost, nowMs);
    },
    // A block's duration travels as the cost, as evaluateState takes it.
    block: async (set, key, durationMs, nowMs) => {
      await run("block", set, key, durationMs, nowMs);
    },
    unblock: async (set, key) => {
      await run("unblock", set, key, 0, Date.now());
    },
  };
}
