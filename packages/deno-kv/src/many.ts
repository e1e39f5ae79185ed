import { type CallSignal, evaluateState, FloodgateError, type ManyCall, type StoreResult } from "@floodgate/core/store";
import { backoffMs, sleep } from "./backoff.ts";
import { type Counts, isBusy, parse, serialize } from "./commits.ts";
import type { KvDatabase, KvEntryMaybe, KvKey } from "./kv.ts";

/*
 * The compound step (RateLimitStore.consumeMany): every pair's entry read, every pair decided on
 * it with evaluateState, and ONE atomic commit that checks every key's versionstamp and sets
 * every new state: all charged, or (another writer changed a key first) none, and the whole step
 * is decided again after a jittered wait, as a single key's round is. When a pair denies, nothing
 * is charged: each pair answers its figures as they stand (a pair that would have admitted, its
 * figures uncharged), and a denying pair writes what a denied consume of it writes (a block
 * started, a log's expired entries dropped), committed the same way (checking every key read);
 * most refusals write nothing.
 */

/** What the step needs of the store. */
export interface ManyContext {
  readonly kv: KvDatabase;
  readonly counts: Counts;
  readonly maxAttempts: number;
  readonly timeoutMs: number;
  keyOf(call: ManyCall): KvKey;
}

/** Deno KV reads at most 10 keys in one getMany. */
const READ_BATCH = 10;

async function readAll(kv: KvDatabase, keys: readonly KvKey[]): Promise<KvEntryMaybe[]> {
  if (typeof kv.getMany !== "function") return Promise.all(keys.map((k) => kv.get(k)));
  if (keys.length <= READ_BATCH) return kv.getMany(keys);
  const batches: Promise<KvEntryMaybe[]>[] = [];
  for (let i = 0; i < keys.length; i += READ_BATCH) batches.push(kv.getMany(keys.slice(i, i + READ_BATCH)));
  return (await Promise.all(batches)).flat();
}

/** See the comment above. */
export async function consumeMany(
  ctx: ManyContext,
  calls: readonly ManyCall[],
  cost: number,
  nowMs: number,
  signal?: CallSignal,
): Promise<StoreResult[]> {
  ctx.counts.operations++;
  const keys = calls.map((call) => ctx.keyOf(call));
  const deadline = Date.now() + ctx.timeoutMs;
  for (let attempt = 0;; attempt++) {
    let ok: boolean;
    let results: StoreResult[];
    try {
      const entries = await readAll(ctx.kv, keys);
      const clockMs = Date.now();
      const evaluations = calls.map((call, i) => evaluateState(call.set, parse(entries[i]!.value)?.state, cost, nowMs, "consume"));
      const charged = evaluations.every((e) => e.result[0] === 1);
      const op = ctx.kv.atomic();
      let writes = 0;
      results = evaluations.map((e, i) => {
        // A refused step charges nothing: a pair that admitted answers its figures uncharged (those
        // of a peek: an admitting cost's figures do not depend on the cost).
        if (!charged && e.result[0] === 1) return evaluateState(calls[i]!.set, parse(entries[i]!.value)?.state, 1, nowMs, "peek").result;
        // Charged, or a denial that changed the state (a block started, a log tidied), as a denied consume writes it.
        const write = charged || (e.result[0] === 0 && e.changed && e.state !== undefined);
        if (write) {
          writes++;
          const expireIn = Math.max(1, Math.ceil(e.expiresAtMs - nowMs));
          op.set(keys[i]!, serialize(e.state, clockMs + expireIn, calls[i]!.key), { expireIn });
        }
        return e.result;
      });
      if (writes === 0) return results;
      op.check(...keys.map((key, i) => ({ key, versionstamp: entries[i]!.versionstamp })));
      ctx.counts.commits++;
      try {
        ok = (await op.commit()).ok;
      } catch (error) {
        if (!isBusy(error)) throw error;
        ok = false;
      }
    } catch (error) {
      if (error instanceof FloodgateError) throw error;
      throw new FloodgateError("STORE_ERROR", `Deno KV store: consumeMany failed: ${(error as Error)?.message ?? String(error)}`, {
        cause: error,
      });
    }
    if (ok) return results;
    ctx.counts.retries++;
    const wait = backoffMs(attempt);
    const why = attempt + 1 >= ctx.maxAttempts
      ? `${ctx.maxAttempts} commits lost to other writers in a row`
      : signal?.aborted
      ? "the caller stopped waiting"
      : Date.now() + wait >= deadline
      ? "still contended at its deadline"
      : undefined;
    if (why !== undefined) {
      ctx.counts.timeouts++;
      throw new FloodgateError("STORE_TIMEOUT", `Deno KV store: consumeMany of ${calls.length} keys gave up: ${why}.`);
    }
    await sleep(wait);
  }
}
