import {
  type CallSignal,
  type EvaluateMode,
  evaluateState,
  FloodgateError,
  type LeaseRequest,
  type PolicySet,
  type ReservationArgs,
  type StoreResult,
} from "@floodgate/core/store";
import { backoffMs, sleep } from "./backoff.ts";
import type { KvDatabase, KvKey } from "./kv.ts";

/*
 * Check-and-set commits, grouped per key. Calls on one key from this store queue up; each round
 * reads the key's entry once, decides the queued calls one after the other on the state each
 * leaves (evaluateState, as the memory store would in that order), and commits the last state in
 * one atomic operation that checks the versionstamp read. A lost race decides the whole group
 * again on the new state after a jittered wait. So concurrent callers in one process never race
 * each other: only other processes' writes make a commit fail, and a hot key costs one commit per
 * round, not one per call. A call's answer is given only once its round has committed.
 */

/** One call waiting for its round. */
export interface Call {
  readonly mode: EvaluateMode;
  readonly set: PolicySet;
  readonly key: string;
  readonly cost: number;
  readonly nowMs: number;
  readonly marks?: readonly number[];
  readonly reservation?: ReservationArgs;
  readonly lease?: LeaseRequest;
  readonly signal?: CallSignal;
  /** When the call gives up (epoch ms on this machine's clock). */
  readonly deadline: number;
  resolve(result: StoreResult): void;
  reject(error: unknown): void;
}

/** What the store writes under a key, as JSON: the state, and when it expires on this machine's clock (an unblock keeps it). */
interface Stored {
  readonly state: unknown;
  readonly expiresAt: number;
}

/** Most calls decided in one round. */
const MAX_ROUND = 256;
/** Deno KV's largest value, bytes. */
const MAX_VALUE_BYTES = 65_536;

/** A stored value that is not this store's JSON text (another program's) reads as no state. */
export function parse(value: unknown): Stored | undefined {
  if (typeof value !== "string") return undefined;
  try {
    const stored = JSON.parse(value) as Partial<Stored> | null;
    return typeof stored?.expiresAt === "number" ? stored as Stored : undefined;
  } catch {
    return undefined;
  }
}

/** SQLite's busy error, which the local backend raises when another process holds the write lock: a lost race like any other. */
export const isBusy = (error: unknown): boolean => /database is (locked|busy)/i.test(String((error as Error)?.message ?? error));

/** Counts of the queue's work. */
export interface Counts {
  operations: number;
  commits: number;
  retries: number;
  timeouts: number;
}

/** The per-key queues of one store. */
export class CommitQueues {
  readonly #kv: KvDatabase;
  readonly #maxAttempts: number;
  readonly #queues = new Map<string, Call[]>();
  readonly counts: Counts = { operations: 0, commits: 0, retries: 0, timeouts: 0 };

  constructor(kv: KvDatabase, maxAttempts: number) {
    this.#kv = kv;
    this.#maxAttempts = maxAttempts;
  }

  /** Queues `call` on key `k` (named `id` in this process); its round starts at once when none is running. */
  enqueue(id: string, k: KvKey, call: Call): void {
    this.counts.operations++;
    const queue = this.#queues.get(id);
    if (queue !== undefined) {
      queue.push(call);
      return;
    }
    const calls = [call];
    this.#queues.set(id, calls);
    void this.#drain(id, k, calls);
  }

  async #drain(id: string, k: KvKey, queue: Call[]): Promise<void> {
    try {
      while (queue.length > 0) await this.#round(k, queue.splice(0, MAX_ROUND));
    } finally {
      this.#queues.delete(id);
    }
  }

  #gaveUp(call: Call, why: string): void {
    this.counts.timeouts++;
    call.reject(new FloodgateError("STORE_TIMEOUT", `Deno KV store: ${call.mode} of ${JSON.stringify(call.key)} gave up: ${why}.`));
  }

  /** The calls still waiting at `atMs`: those abandoned or past their deadline are failed. */
  #live(calls: Call[], atMs: number, why: string): Call[] {
    return calls.filter((call) => {
      if (call.signal?.aborted) this.#gaveUp(call, "the caller stopped waiting");
      else if (call.deadline <= atMs) this.#gaveUp(call, why);
      else return true;
      return false;
    });
  }

  async #round(k: KvKey, calls: Call[]): Promise<void> {
    let live = this.#live(calls, Date.now(), "its deadline passed while it waited for its turn");
    for (let attempt = 0; live.length > 0; attempt++) {
      let ok: boolean;
      let results: (StoreResult | undefined)[];
      try {
        const entry = await this.#kv.get(k);
        const decided = decide(live, parse(entry.value), Date.now());
        results = decided.results;
        if (decided.value === null) return settle(live, results);
        this.counts.commits++;
        ok = await this.#commit(k, entry.versionstamp, decided.value, decided.expireIn);
      } catch (error) {
        const failure = error instanceof FloodgateError
          ? error
          : new FloodgateError("STORE_ERROR", `Deno KV store: ${live[0]!.mode} failed: ${(error as Error)?.message ?? String(error)}`, {
            cause: error,
          });
        for (const call of live) call.reject(failure);
        return;
      }
      if (ok) return settle(live, results);
      this.counts.retries++;
      if (attempt + 1 >= this.#maxAttempts) {
        const why = `${this.#maxAttempts} commits lost to other writers in a row (a contended key: leased mode takes it off this path)`;
        for (const call of live) this.#gaveUp(call, why);
        return;
      }
      const wait = backoffMs(attempt);
      live = this.#live(live, Date.now() + wait, "still contended at its deadline");
      if (live.length > 0) await sleep(wait);
    }
  }

  async #commit(k: KvKey, versionstamp: string | null, value: string | undefined, expireIn: number): Promise<boolean> {
    const op = this.#kv.atomic().check({ key: k, versionstamp });
    if (value === undefined) op.delete(k);
    else op.set(k, value, { expireIn });
    try {
      return (await op.commit()).ok;
    } catch (error) {
      if (isBusy(error)) return false;
      throw error;
    }
  }
}

/** Answers each call its result (a call whose evaluation threw was rejected already). */
function settle(calls: Call[], results: (StoreResult | undefined)[]): void {
  calls.forEach((call, i) => {
    if (results[i] !== undefined) call.resolve(results[i]!);
  });
}

/**
 * Decides `calls` in order on `stored`: their results, and what to commit (`value` null when no
 * call changed anything; undefined to delete the key). A call whose evaluation throws (bad
 * arguments) is rejected alone; the others go on.
 */
function decide(calls: Call[], stored: Stored | undefined, clockMs: number) {
  let state = stored?.state;
  let expiresAt = stored?.expiresAt;
  let expireIn = 1;
  let changed = false;
  const results: (StoreResult | undefined)[] = [];
  for (const call of calls) {
    try {
      const evaluation = evaluateState(call.set, state, call.cost, call.nowMs, call.mode, call.marks, call.reservation, call.lease);
      results.push(evaluation.result);
      if (!evaluation.changed) continue;
      changed = true;
      state = evaluation.state;
      // A duration on the limiter's clock; an unblock carries no time of the limiter's, so the expiry stays.
      expireIn = call.mode === "unblock" && expiresAt !== undefined
        ? Math.max(1, Math.ceil(expiresAt - clockMs))
        : Math.max(1, Math.ceil(evaluation.expiresAtMs - call.nowMs));
      expiresAt = clockMs + expireIn;
    } catch (error) {
      results.push(undefined);
      call.reject(error);
    }
  }
  if (!changed) return { results, value: null, expireIn };
  const value = state === undefined ? undefined : serialize(state, expiresAt!, calls[0]!.key);
  return { results, value, expireIn };
}

/** The stored value: the state and its expiry as JSON, within Deno KV's 64 KiB per value. */
export function serialize(state: unknown, expiresAt: number, key: string): string {
  const value = JSON.stringify({ state, expiresAt });
  if (value.length * 3 > MAX_VALUE_BYTES && new TextEncoder().encode(value).length > MAX_VALUE_BYTES) {
    throw new FloodgateError(
      "STORE_ERROR",
      `Deno KV store: the state of ${
        JSON.stringify(key)
      } needs more than Deno KV's 64 KiB per value (a sliding log keeps one timestamp per unit of its limit; keep its limit under about 3,000, or use slidingWindow).`,
    );
  }
  return value;
}
