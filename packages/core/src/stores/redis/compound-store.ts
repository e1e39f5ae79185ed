import { FIELDS_PER_POLICY } from "../../algorithms/algorithm.ts";
import type { CallSignal, ManyCall, StoreResult } from "../store.ts";
import { compoundLua } from "./compound-lua.ts";
import { baseKey, keysOf } from "./keys.ts";
import { abandoned, isNoScript, isResult, storeError, unexpectedReply } from "./replies.ts";

/*
 * The Redis stores' compound step (RateLimitStore.consumeMany): one script call over every pair's
 * keys (compound-lua.ts). On a Redis Cluster, keys of different identifiers usually lie in
 * different slots, and the server refuses the call (CROSSSLOT) before running anything: the store
 * then answers `undefined` (nothing charged) and, from then on, answers so at once for any call
 * whose keys do not share one slot, so that the limiter decides those pairs one by one.
 */

/** What the call needs of each pair's prepared set: its policies' (kind, limit, parameter) triples. */
export interface CompoundPart {
  readonly count: number;
  readonly multiTail: readonly string[];
}

/** The part of the store's transport a compound call uses (script-store.ts's `ScriptTransport`). */
export interface CompoundTransport {
  evalsha(sha: string, keys: string[], args: readonly string[]): Promise<unknown>;
  eval(source: string, keys: string[], args: readonly string[]): Promise<unknown>;
}

/** Per transport: whether it refused keys in different slots once (a Redis Cluster). */
export interface CompoundState {
  cluster: boolean;
}

/** Whether the server refused the keys for lying in different Cluster slots (nothing ran). */
export function isCrossSlot(error: unknown): boolean {
  const message = error instanceof Error ? error.message : typeof error === "string" ? error : "";
  return message.startsWith("CROSSSLOT") || message.startsWith("Command failed: CROSSSLOT");
}

/** One compound script call: see the comment above and `RateLimitStore.consumeMany`. */
export async function compoundCall(
  name: string,
  transport: CompoundTransport,
  state: CompoundState,
  parts: readonly CompoundPart[],
  calls: readonly ManyCall[],
  cost: number,
  now: string,
  signal: CallSignal | undefined,
): Promise<StoreResult[] | undefined> {
  const keys: string[] = [];
  const args: string[] = [String(cost)];
  const starts: string[] = [];
  const blocks: string[] = [];
  const slots = new Set<string>();
  for (let c = 0; c < calls.length; c++) {
    const part = parts[c]!;
    const base = baseKey(calls[c]!.set.prefix, calls[c]!.key);
    if (state.cluster) slots.add(slotOf(base));
    starts.push(String(keys.length + 1));
    for (const k of keysOf(base, part.count)) keys.push(k);
    for (const v of part.multiTail) args.push(v);
    for (const p of calls[c]!.set.policies) blocks.push(String(p.blockMs));
  }
  if (slots.size > 1) return undefined;
  args.push(now, String(calls.length), ...starts, ...blocks);
  const script = compoundLua();
  let reply: unknown;
  try {
    reply = await transport.evalsha(script.sha, keys, args);
  } catch (error) {
    if (isCrossSlot(error)) {
      state.cluster = true;
      return undefined;
    }
    if (!isNoScript(error)) throw storeError(name, "consumeMany", error);
    if (signal?.aborted === true) throw abandoned(name, "consumeMany");
    try {
      reply = await transport.eval(script.source, keys, args);
    } catch (retryError) {
      throw storeError(name, "consumeMany", retryError);
    }
  }
  const total = keys.length;
  const length = 1 + total * FIELDS_PER_POLICY + (Array.isArray(reply) && reply[0] === 1 ? total : 0);
  if (!isResult(reply, length)) throw unexpectedReply(name, "consumeMany", reply, `an array of ${length} integers`);
  return split(reply, parts, total);
}

/** The script's answer over all policies, as one consume answer per pair. */
function split(reply: number[], parts: readonly CompoundPart[], total: number): StoreResult[] {
  const charged = reply[0] === 1;
  const results: StoreResult[] = [];
  let from = 0;
  for (const part of parts) {
    const r = [1];
    for (let p = from; p < from + part.count; p++) {
      const i = 1 + p * FIELDS_PER_POLICY;
      if (reply[i] !== 1) r[0] = 0;
      r.push(reply[i]!, reply[i + 1]!, reply[i + 2]!, reply[i + 3]!);
    }
    if (charged) { for (let p = from; p < from + part.count; p++) r.push(reply[1 + total * FIELDS_PER_POLICY + p]!); }
    results.push(r);
    from += part.count;
  }
  return results;
}

/**
 * The hash tag of a key `prefix{identifier}`: what Redis Cluster hashes to a slot. Keys with the
 * same tag share a slot; keys with different tags, almost always not. Used only once the server
 * has refused a call for crossing slots, so that later calls that would cross are not sent.
 */
function slotOf(base: string): string {
  const open = base.indexOf("{");
  return base.slice(open + 1, base.indexOf("}", open + 1));
}
