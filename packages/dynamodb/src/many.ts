import { evaluateState, FloodgateError, type ManyCall, type PolicySet, type StoreResult } from "@floodgate/core/store";
import { ASSUMED_ABSENT, type Seen, type SeenCache } from "./items.ts";

/*
 * The compound step (RateLimitStore.consumeMany): every pair decided with evaluateState on its
 * item as this instance last saw it (or assumed absent), and, when every pair admits, ONE
 * TransactWriteItems that puts every new state, each under the condition that its item's version
 * is still the one seen: all are written, or none. When a condition fails, the cancellation
 * returns those items (ALL_OLD) and the step is decided again on them, as a single key's write
 * is. When a pair denies, nothing is charged: the refusal stands only on items read from
 * DynamoDB (those only remembered are read first, consistently); each pair answers its figures as
 * they stand (an admitting pair's uncharged: those of a peek, which do not depend on the cost),
 * and a denying pair whose state changed (a block started) is written as a denied consume writes
 * it. A server without transactions (an emulator) answers that the operation is unknown: the
 * step then answers `undefined`, and the limiter decides the pairs one by one.
 */

/** One item of a transaction: its key, the item as seen, and the state to put. */
export interface TransactPut {
  readonly k: string;
  readonly seen: Seen;
  readonly state: unknown;
  readonly nowMs: number;
  readonly expiresAtMs: number;
}

/** A transaction's outcome: every item's new view, or per item the one its failed condition found (`null`: it passed). */
export type Transacted = { ok: true; seen: Seen[] } | { ok: false; current: (Seen | undefined | null)[] };

/** What the step needs of the store (store.ts). */
export interface ManyContext {
  readonly cache: SeenCache;
  keyOf(set: PolicySet, key: string): string;
  read(k: string): Promise<Seen>;
  write(k: string, seen: Seen, state: unknown, nowMs: number, expiresAtMs: number): Promise<{ ok: true; seen: Seen } | { ok: false }>;
  transact(puts: readonly TransactPut[]): Promise<Transacted>;
  /** Set once the server refused transactions as an unknown operation. */
  noTransactions: boolean;
}

/** As the single-key path: decisions again after lost races, at most this many. */
const MAX_ATTEMPTS = 200;
const MAX_PAUSE_MS = 50;
const pause = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** See the comment above. */
export async function consumeMany(
  ctx: ManyContext,
  calls: readonly ManyCall[],
  cost: number,
  nowMs: number,
): Promise<StoreResult[] | undefined> {
  if (ctx.noTransactions) return undefined;
  const keys = calls.map((c) => ctx.keyOf(c.set, c.key));
  const seen = keys.map((k) => ctx.cache.get(k) ?? ASSUMED_ABSENT);
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    const evaluations = calls.map((c, i) => evaluateState(c.set, seen[i]!.state, cost, nowMs, "consume"));
    if (evaluations.every((e) => e.result[0] === 1)) {
      let outcome: Transacted;
      try {
        outcome = await ctx.transact(
          evaluations.map((e, i) => ({ k: keys[i]!, seen: seen[i]!, state: e.state, nowMs, expiresAtMs: e.expiresAtMs })),
        );
      } catch (error) {
        if ((error as Error)?.name !== "UnknownOperationException") throw error;
        ctx.noTransactions = true;
        return undefined;
      }
      if (outcome.ok) {
        keys.forEach((k, i) => ctx.cache.set(k, outcome.seen[i]!));
        return evaluations.map((e) => e.result);
      }
      // Decided again on the items the failed conditions found (read when none came back).
      if (attempt > 0) await pause(Math.random() * Math.min(MAX_PAUSE_MS, 2 ** attempt));
      await Promise.all(outcome.current.map(async (current, i) => {
        if (current !== null) seen[i] = current ?? await ctx.read(keys[i]!);
      }));
      continue;
    }
    // A refusal stands only on items read from DynamoDB.
    if (seen.some((s) => !s.verified)) {
      await Promise.all(seen.map(async (s, i) => {
        if (!s.verified) seen[i] = await ctx.read(keys[i]!);
      }));
      continue;
    }
    let lost = false;
    const results = await Promise.all(evaluations.map(async (e, i) => {
      if (e.result[0] === 1) return evaluateState(calls[i]!.set, seen[i]!.state, 1, nowMs, "peek").result;
      if (e.changed && e.state !== undefined) {
        const written = await ctx.write(keys[i]!, seen[i]!, e.state, nowMs, e.expiresAtMs);
        if (written.ok) seen[i] = written.seen;
        else lost = true;
      }
      return e.result;
    }));
    if (!lost) {
      keys.forEach((k, i) => ctx.cache.set(k, seen[i]!));
      return results;
    }
    // A block's write lost a race: decided again on items read afresh.
    for (let i = 0; i < keys.length; i++) seen[i] = await ctx.read(keys[i]!);
  }
  throw new FloodgateError(
    "STORE_ERROR",
    `dynamoDBStore: consumeMany of ${calls.length} keys lost ${MAX_ATTEMPTS} races in a row to other writers of the same keys.`,
  );
}
