/**
 * A complete store on a key-value database that cannot run scripts but offers compare-and-set
 * (DynamoDB's conditional writes, etcd transactions, a SQL row with a version column...), built
 * on `evaluateState`, from nothing but `@floodgate/core/store`, the entry for store authors. Its
 * tests run it over `VersionedMap` (versioned-map.ts), an in-process stand-in whose every
 * operation is asynchronous, so concurrent callers interleave between read and write as they
 * would over a network. docs/writing-a-store.md walks through it.
 */
import {
  type EvaluateMode,
  evaluateState,
  FloodgateError,
  type LeaseRequest,
  type PolicySet,
  type RateLimitStore,
  type ReservationArgs,
  type StoreResult,
} from "@floodgate/core/store";

/** What the store needs of the database: versioned reads and writes that succeed only if the version is unchanged. */
export interface CompareAndSetKV {
  /** The value and its version; `version` 0 when the key is absent. */
  get(key: string): Promise<{ value: string | undefined; version: number }>;
  /**
   * Writes `value` (deletes the key when `undefined`) if the key's version is still `version`;
   * resolves to false when another writer got there first. `expiresAtMs` may become a TTL.
   */
  setIf(key: string, version: number, value: string | undefined, expiresAtMs: number): Promise<boolean>;
  delete(key: string): Promise<void>;
}

/** How many times one operation retries after losing a race before giving up. */
const MAX_ATTEMPTS = 100;

export function kvStore(kv: CompareAndSetKV): RateLimitStore & { readonly conflicts: number } {
  let conflicts = 0;
  // One key per identifier in the limiter's namespace. The limiter's prefix has no `{` or `}`.
  const keyOf = (set: PolicySet, key: string): string => `${set.prefix}{${key}}`;

  async function run(
    set: PolicySet,
    key: string,
    cost: number,
    nowMs: number,
    mode: EvaluateMode,
    marks?: readonly number[],
    reservation?: ReservationArgs,
    lease?: LeaseRequest,
  ): Promise<StoreResult> {
    const k = keyOf(set, key);
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const { value, version } = await kv.get(k);
      const evaluation = evaluateState(
        set,
        value === undefined ? undefined : parseJson(value),
        cost,
        nowMs,
        mode,
        marks,
        reservation,
        lease,
      );
      if (!evaluation.changed) return evaluation.result;
      const next = evaluation.state === undefined ? undefined : JSON.stringify(evaluation.state);
      if (await kv.setIf(k, version, next, evaluation.expiresAtMs)) return evaluation.result;
      conflicts++; // another writer changed the key between our read and our write: decide again
    }
    throw new FloodgateError("STORE_ERROR", `kv store: ${mode} of "${key}" lost ${MAX_ATTEMPTS} races in a row; the key is too contended.`);
  }

  return {
    name: "kv",
    ownsClock: false,
    get conflicts() {
      return conflicts;
    },
    consume: (set, key, cost, nowMs) => run(set, key, cost, nowMs, "consume"),
    peek: (set, key, nowMs) => run(set, key, 1, nowMs, "peek"),
    refund: async (set, key, cost, nowMs, marks) => {
      await run(set, key, cost, nowMs, "refund", marks);
    },
    reset: (set, key) => kv.delete(keyOf(set, key)),
    // A penalty, a block (its duration in ms where the others take a cost) and its lifting are
    // read-evaluate-write cycles like the others.
    penalty: async (set, key, cost, nowMs) => {
      await run(set, key, cost, nowMs, "penalty");
    },
    block: async (set, key, durationMs, nowMs) => {
      await run(set, key, durationMs, nowMs, "block");
    },
    unblock: async (set, key) => {
      await run(set, key, 0, 0, "unblock");
    },
    // A reservation's record lives in the key's own state: reserving and settling stay one
    // compare-and-set of one value.
    reserve: (set, key, cost, nowMs, id, ttlMs) => run(set, key, cost, nowMs, "reserve", undefined, { id, ttlMs }),
    settle: async (set, key, id, actual, nowMs) => (await run(set, key, 0, nowMs, "settle", undefined, { id, actual }))[0] === 1,
    // Leased mode: returns, the request and a new lease in one compare-and-set of the key's state.
    lease: (set, key, request, nowMs) => run(set, key, 0, nowMs, "lease", undefined, undefined, request),
  };
}

/** A stored value that is not JSON (another program's, a truncated write) reads as no state. */
function parseJson(value: string): unknown {
  try {
    return JSON.parse(value);
  } catch {
    return undefined;
  }
}
