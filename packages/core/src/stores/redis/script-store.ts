import { FIELDS_PER_POLICY, toMicros } from "../../algorithms/algorithm.ts";
import type { CallSignal, LeaseRequest, ManyCall, PolicySet, RateLimitStore, StoreResult } from "../store.ts";
import { compoundCall, type CompoundState } from "./compound-store.ts";
import { isBoolean, oneOf, type OptionSpecs, whole } from "../../validation.ts";
import { denyCached } from "../deny-cache/deny-cache-store.ts";
import { baseKey, keysOf } from "./keys.ts";
import { leaseCall } from "./lease-store.ts";
import { type LuaScript, luaScripts } from "./lua.ts";
import { multiTailOf, type Prepared, prepareSet, type ScriptGate } from "./prepared.ts";
import { abandoned, isNoScript, isResult, storeError, unexpectedReply } from "./replies.ts";
import { ledgerKey, reservationScripts } from "./reservation-lua.ts";

export { baseKey } from "./keys.ts";

/** Options shared by {@link upstashStore} and {@link redisStore}. */
export interface ScriptStoreOptions {
  /**
   * Whose clock decides: `"server"` (default) reads the Redis server's clock inside the script,
   * so instances with skewed clocks agree; `"local"` uses the time the limiter passes (its
   * `clock` option), e.g. to replay traces in tests.
   */
  clock?: "server" | "local";
  /**
   * Answer `consume`s for an identifier already denied locally, with no round trip, until the
   * store would admit it again (default `true`). Another process's `reset`/`refund` is not seen
   * by this cache; this process's are.
   */
  denyCache?: boolean;
  /** Most identifiers the deny cache holds; the oldest goes first (default 10,000). */
  denyCacheMaxKeys?: number;
}

/** A Redis store's extra surface. */
export interface RedisScriptStore extends RateLimitStore {
  readonly ownsClock: boolean;
  /** Identifiers currently in the deny cache (0 when it is off). */
  readonly deniedKeys: number;
  /** Clears the deny cache; the client stays open (it belongs to the caller). */
  dispose(): void;
}

/**
 * The three operations a client adapter must provide. The store may pass the same `args` array
 * to many calls (it is never changed): adapters hand it on, they do not keep or modify it.
 */
export interface ScriptTransport {
  evalsha(sha: string, keys: string[], args: readonly string[]): Promise<unknown>;
  eval(source: string, keys: string[], args: readonly string[]): Promise<unknown>;
  del(keys: string[]): Promise<unknown>;
  /** Asks the client for a fresh connection (see client-connection.ts). */
  reconnect?(): void;
  /** Stops watching the client. */
  dispose?(): void;
}

/** The options both Redis stores share. */
export const SCRIPT_STORE_OPTIONS: OptionSpecs = {
  clock: [/* @__PURE__ */ oneOf(["server", "local"]), '"server" (default) or "local"'],
  denyCache: [isBoolean, "true (default) or false"],
  denyCacheMaxKeys: [/* @__PURE__ */ whole(1, 10_000_000), "a whole number from 1 to 10000000 (default 10000)"],
};

type Op = "consume" | "peek" | "refund";

const NO_RESULT: StoreResult = /* @__PURE__ */ Object.freeze([]);

/** A Redis store over `transport`: the script store, in the deny cache unless `denyCache` is false. */
export function scriptStore(name: string, transport: ScriptTransport, options: ScriptStoreOptions): RedisScriptStore {
  const store = new ScriptStore(name, transport, options);
  return options.denyCache === false ? store : denyCached(store, options.denyCacheMaxKeys ?? 10_000);
}

/**
 * The engine both Redis stores share: one atomic script call per decision (EVALSHA, then EVAL
 * only on NOSCRIPT), keys `prefix{identifier}` (`:1`, `:2`... for further policies). The store
 * factories wrap it in the deny cache (deny-cache/). A call allocates its keys array and, unless
 * it is a cost-1 consume or a peek on the server's clock (then ARGV is precomputed per policy
 * set), its ARGV; no closures.
 */
export class ScriptStore implements RedisScriptStore {
  readonly name: string;
  readonly ownsClock: boolean;
  /** A denying consume calls its signal's `denied` before its promise resolves. */
  readonly notesDenials = true;
  readonly #transport: ScriptTransport;
  readonly #prepared = new WeakMap<PolicySet, Prepared>();
  #lastSet: PolicySet | undefined = undefined;
  #lastPrepared: Prepared | undefined = undefined;
  readonly #compound: CompoundState = { cluster: false };
  readonly #gates = new Map<string, ScriptGate>();

  constructor(name: string, transport: ScriptTransport, options: ScriptStoreOptions) {
    this.name = name;
    this.#transport = transport;
    this.ownsClock = (options.clock ?? "server") === "server";
  }

  /** Always 0: the deny cache is the wrapper's. */
  get deniedKeys(): number {
    return 0;
  }

  consume(set: PolicySet, key: string, cost: number, nowMs: number, signal?: CallSignal): Promise<StoreResult> {
    return this.#run(this.#preparedOf(set), baseKey(set.prefix, key), "consume", cost, nowMs, signal);
  }

  peek(set: PolicySet, key: string, nowMs: number, signal?: CallSignal): Promise<StoreResult> {
    return this.#run(this.#preparedOf(set), baseKey(set.prefix, key), "peek", 1, nowMs, signal);
  }

  /** A compound step: one script call over every pair's keys (compound-store.ts). */
  consumeMany(calls: readonly ManyCall[], cost: number, nowMs: number, signal?: CallSignal): Promise<StoreResult[] | undefined> {
    // A calendar window's parameter depends on the clock: such a set sends its tails at `nowMs`.
    const parts = calls.map((c) => {
      const prepared = this.#preparedOf(c.set);
      return prepared.at === undefined ? prepared : { count: prepared.count, multiTail: prepared.at(nowMs).multiTail };
    });
    return compoundCall(this.name, this.#transport, this.#compound, parts, calls, cost, this.#now(nowMs), signal);
  }

  async refund(set: PolicySet, key: string, cost: number, nowMs: number, marks?: readonly number[]): Promise<void> {
    await this.#run(this.#preparedOf(set), baseKey(set.prefix, key), "refund", cost, nowMs, undefined, marks);
  }

  reserve(
    set: PolicySet,
    key: string,
    cost: number,
    nowMs: number,
    id: string,
    ttlMs: number,
    signal?: CallSignal,
  ): Promise<StoreResult> {
    return this.#reserve(this.#preparedOf(set), baseKey(set.prefix, key), cost, nowMs, id, ttlMs, signal);
  }

  async settle(set: PolicySet, key: string, id: string, actual: number, nowMs: number): Promise<boolean> {
    const prepared = this.#preparedOf(set);
    const base = baseKey(set.prefix, key);
    const keys = keysOf(base, prepared.count);
    keys.push(ledgerKey(base, id));
    const reply = await this.#script(
      reservationScripts().settle,
      keys,
      [String(actual), ...multiTailOf(prepared, nowMs), this.#now(nowMs)],
      "settle",
    );
    if (reply !== 0 && reply !== 1) throw unexpectedReply(this.name, "settle", reply, "0 or 1");
    return reply === 1;
  }

  /** A leased decision: see {@link RateLimitStore.lease} and lease-store.ts. */
  lease(set: PolicySet, key: string, request: LeaseRequest, nowMs: number, signal?: CallSignal): Promise<StoreResult> {
    const prepared = this.#preparedOf(set);
    const base = baseKey(set.prefix, key);
    const ctx = { name: this.name, ownsClock: this.ownsClock, transport: this.#transport };
    return leaseCall(ctx, set, base, keysOf(base, prepared.count), request, nowMs, signal);
  }

  async reset(set: PolicySet, key: string): Promise<void> {
    const base = baseKey(set.prefix, key);
    const keys = keysOf(base, set.policies.length);
    keys.push(`${base}:b`);
    try {
      await this.#transport.del(keys);
    } catch (error) {
      throw storeError(this.name, "reset", error);
    }
  }

  async penalty(set: PolicySet, key: string, cost: number, nowMs: number): Promise<void> {
    await this.#admin(set, key, "p", cost, nowMs);
  }

  async block(set: PolicySet, key: string, durationMs: number, nowMs: number): Promise<void> {
    await this.#admin(set, key, "b", durationMs, nowMs);
  }

  async unblock(set: PolicySet, key: string): Promise<void> {
    try {
      await this.#transport.del([`${baseKey(set.prefix, key)}:b`]);
    } catch (error) {
      throw storeError(this.name, "unblock", error);
    }
  }

  /** Stops watching the client's connection; the client itself belongs to the caller. */
  dispose(): void {
    this.#transport.dispose?.();
  }

  /** Moves to a fresh connection of the client (see client-connection.ts). */
  reconnect(): void {
    this.#transport.reconnect?.();
  }

  async #reserve(
    prepared: Prepared,
    base: string,
    cost: number,
    nowMs: number,
    id: string,
    ttlMs: number,
    signal: CallSignal | undefined,
  ): Promise<StoreResult> {
    const keys = keysOf(base, prepared.count);
    keys.push(ledgerKey(base, id));
    const reply = await this.#script(
      reservationScripts().reserve,
      keys,
      [String(cost), ...multiTailOf(prepared, nowMs), this.#now(nowMs), String(ttlMs), ...prepared.blocks],
      "reserve",
      signal,
    );
    const length = 1 + prepared.count * FIELDS_PER_POLICY + (Array.isArray(reply) && reply[0] === 1 ? prepared.count : 0);
    if (!isResult(reply, length)) throw unexpectedReply(this.name, "reserve", reply, `an array of ${length} integers`);
    return reply;
  }

  /** The time argument: "" for the server's clock, else the limiter's in integer µs. */
  #now(nowMs: number): string {
    return this.ownsClock ? "" : String(toMicros(nowMs));
  }

  /** EVALSHA, then EVAL only on NOSCRIPT and only while the caller still waits (see #run). */
  async #script(script: LuaScript, keys: string[], args: readonly string[], op: string, signal?: CallSignal): Promise<unknown> {
    try {
      return await this.#transport.evalsha(script.sha, keys, args);
    } catch (error) {
      if (!isNoScript(error)) throw storeError(this.name, op, error);
      if (signal?.aborted === true) throw abandoned(this.name, op);
      try {
        return await this.#transport.eval(script.source, keys, args);
      } catch (retryError) {
        throw storeError(this.name, op, retryError);
      }
    }
  }

  /** EVAL (runs and loads the script) while the server is not known to hold it: one command a call. */
  async #eval(script: LuaScript, keys: string[], args: readonly string[], op: string, gate: ScriptGate): Promise<unknown> {
    try {
      const reply = await this.#transport.eval(script.source, keys, args);
      gate.loaded = true;
      return reply;
    } catch (error) {
      throw storeError(this.name, op, error);
    }
  }

  /** A penalty ("p") or a manual block ("b"), in the admin script. */
  async #admin(set: PolicySet, key: string, op: "p" | "b", amount: number, nowMs: number): Promise<void> {
    const prepared = this.#preparedOf(set);
    const keys = keysOf(baseKey(set.prefix, key), prepared.count);
    const args = [op, String(amount), this.ownsClock ? "" : String(toMicros(nowMs)), ...multiTailOf(prepared, nowMs)];
    const script = luaScripts().admin;
    await this.#script(script, keys, args, op === "p" ? "penalty" : "block");
  }

  /**
   * One script call. An async function on purpose: it awaits the client's promise once, exactly
   * the hop a `.then` would take, and keeps its per-call state without allocating closures.
   * `signal`: once aborted, the caller has stopped waiting, and no EVAL follows a NOSCRIPT (it
   * would charge a request that already got another answer).
   */
  async #run(
    prepared: Prepared,
    base: string,
    op: Op,
    cost: number,
    nowMs: number,
    signal?: CallSignal,
    marks?: readonly number[],
  ): Promise<StoreResult> {
    const keys = keysOf(base, prepared.count);
    let args: readonly string[];
    let { script, gate } = prepared;
    if (prepared.constant && cost === 1 && op !== "refund") {
      if (op === "peek") args = prepared.peek;
      else if (prepared.one === undefined) args = prepared.consume1;
      else ({ script, gate } = prepared.one, args = prepared.tail);
    } else {
      const tail = prepared.at === undefined ? prepared.tail : prepared.at(nowMs).tail;
      const list = [op === "consume" ? String(cost) : op === "peek" ? "0" : String(-cost), ...tail];
      const after = marks ?? (op === "consume" && prepared.blocks.length > 0 ? prepared.blocks : undefined);
      // The marks (or blocks) follow the time, which is then always sent: "" for the server's clock.
      if (!this.ownsClock) list.push(String(toMicros(nowMs)));
      else if (after !== undefined) list.push("");
      if (after !== undefined) { for (const mark of after) list.push(String(mark)); }
      args = list;
    }
    let reply: unknown;
    if (gate.loaded) {
      try {
        reply = await this.#transport.evalsha(script.sha, keys, args);
      } catch (error) {
        if (!isNoScript(error)) throw storeError(this.name, op, error);
        // The server lost its scripts (a restart, SCRIPT FLUSH, a failover): EVAL until one loads it.
        gate.loaded = false;
        if (signal?.aborted === true) throw abandoned(this.name, op);
        reply = await this.#eval(script, keys, args, op, gate);
      }
    } else {
      reply = await this.#eval(script, keys, args, op, gate);
    }
    if (op === "refund") return NO_RESULT;
    if (op === "consume" && prepared.fast !== undefined) {
      // A first step's short answer, read as the usual result: numbers of the right count by
      // construction, so not checked again.
      const result = prepared.fast(reply, cost);
      if (result !== undefined) {
        if (result[0] === 0) signal?.denied?.(result);
        return result;
      }
    }
    // A charged admission carries one mark per policy after the figures.
    const length = 1 + prepared.count * FIELDS_PER_POLICY +
      (op === "consume" && Array.isArray(reply) && reply[0] === 1 ? prepared.count : 0);
    if (!isResult(reply, length)) throw unexpectedReply(this.name, op, reply, `an array of ${length} integers`);
    if (reply[0] === 0 && op === "consume") signal?.denied?.(reply);
    return reply;
  }

  /** The set's preparation: the last set's kept at hand (a limiter calls with one set), others in a WeakMap. */
  #preparedOf(set: PolicySet): Prepared {
    if (set === this.#lastSet) return this.#lastPrepared!;
    const prepared = this.#prepared.get(set) ?? this.#prepare(set);
    this.#lastSet = set;
    this.#lastPrepared = prepared;
    return prepared;
  }

  #prepare(set: PolicySet): Prepared {
    const prepared = prepareSet(this.name, set, this.ownsClock, (script) => this.#gate(script));
    this.#prepared.set(set, prepared);
    return prepared;
  }

  /** The gate of a script on this store's server, shared by every policy set that calls it. */
  #gate(script: LuaScript): ScriptGate {
    let gate = this.#gates.get(script.sha);
    if (gate === undefined) this.#gates.set(script.sha, gate = { loaded: false });
    return gate;
  }
}
