import { FIELDS_PER_POLICY, toMicros, traitsOf } from "../../algorithms/algorithm.ts";
import { ALGORITHMS } from "../../algorithms/registry.ts";
import { describeValue, FloodgateError } from "../../errors.ts";
import type { CallSignal, LeaseRequest, PolicySet, RateLimitStore, StoreResult } from "../store.ts";
import { isBoolean, oneOf, type OptionSpecs, whole } from "../../validation.ts";
import { DenyCache } from "./deny-cache.ts";
import { leaseCall } from "./lease-store.ts";
import { type LuaScript, luaScripts } from "./lua.ts";
import { ledgerKey, reservationScripts } from "./reservation-lua.ts";

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
}

/** The options both Redis stores share. */
export const SCRIPT_STORE_OPTIONS: OptionSpecs = {
  clock: [/* @__PURE__ */ oneOf(["server", "local"]), '"server" (default) or "local"'],
  denyCache: [isBoolean, "true (default) or false"],
  denyCacheMaxKeys: [/* @__PURE__ */ whole(1, 10_000_000), "a whole number from 1 to 10000000 (default 10000)"],
};

type Op = "consume" | "peek" | "refund";

/** Everything about a policy set a call needs, computed once per set. */
interface Prepared {
  readonly id: number;
  readonly script: LuaScript;
  readonly count: number;
  readonly limits: readonly number[];
  /** ARGV after the cost: per policy (kind letter in the multi script,) limit, parameter. */
  readonly tail: readonly string[];
  /** The whole ARGV of a consume of cost 1 and of a peek on the server's clock: the same every call. */
  readonly consume1: readonly string[];
  readonly peek: readonly string[];
  /** Per policy its `block` in ms, sent after the time with a consume; empty when no policy blocks. */
  readonly blocks: readonly string[];
  /** Per policy: kind letter, limit, parameter (the admin and reservation scripts' form, single policies too). */
  readonly multiTail: readonly string[];
  /**
   * Whether denials may be cached: not with a concurrency policy, whose units come back when a
   * holder settles (in any process), long before the timeout a cached denial would wait for.
   */
  readonly cacheable: boolean;
}

const NO_RESULT: StoreResult = /* @__PURE__ */ Object.freeze([]);

// Chosen once.
const monotonic: () => number =
  /* @__PURE__ */ (() => typeof globalThis.performance?.now === "function" ? () => globalThis.performance.now() : () => Date.now())();

/**
 * The script's reply as the limiter reads it: exactly `length` numbers. Anything else (numbers
 * as strings from ioredis' `stringNumbers` or a proxy, a truncated array) would be read as a
 * denial or as missing figures, so it is a STORE_ERROR instead.
 */
function isResult(reply: unknown, length: number): reply is number[] {
  if (!Array.isArray(reply) || reply.length !== length) return false;
  for (let i = 0; i < length; i++) if (typeof reply[i] !== "number") return false;
  return true;
}

/**
 * Whether the server answered NOSCRIPT: the error code starts the message (ioredis, node-redis,
 * @upstash/redis' HTTP 400 `NOSCRIPT ..., command was: [...]`), after `Command failed: ` with
 * @upstash/redis' auto-pipelining. Anywhere else it may come from an identifier echoed in the
 * request body (@upstash/redis quotes it in every non-2xx error): that failure may have come
 * after the script ran, and an EVAL would charge again.
 */
function isNoScript(error: unknown): boolean {
  const message = error instanceof Error ? error.message : typeof error === "string" ? error : "";
  return message.startsWith("NOSCRIPT") || message.startsWith("Command failed: NOSCRIPT");
}

/**
 * The engine both Redis stores share: one atomic script call per decision (EVALSHA, then EVAL
 * only on NOSCRIPT), keys `prefix{identifier}` (`:1`, `:2`... for further policies), an optional deny cache.
 * A call allocates its keys array and, unless it is a cost-1 consume or a peek on the server's
 * clock (then ARGV is precomputed per policy set), its ARGV; no closures.
 */
export class ScriptStore implements RedisScriptStore {
  readonly name: string;
  readonly ownsClock: boolean;
  readonly #transport: ScriptTransport;
  readonly #cache: DenyCache | undefined;
  readonly #prepared = new WeakMap<PolicySet, Prepared>();
  #nextId = 1;

  constructor(name: string, transport: ScriptTransport, options: ScriptStoreOptions) {
    this.name = name;
    this.#transport = transport;
    this.ownsClock = (options.clock ?? "server") === "server";
    this.#cache = options.denyCache === false ? undefined : new DenyCache(options.denyCacheMaxKeys ?? 10_000);
  }

  get deniedKeys(): number {
    return this.#cache?.size ?? 0;
  }

  consume(set: PolicySet, key: string, cost: number, nowMs: number, signal?: CallSignal): Promise<StoreResult> | StoreResult {
    const prepared = this.#prepared.get(set) ?? this.#prepare(set);
    const base = baseKey(set.prefix, key);
    const cache = this.#cache;
    if (cache === undefined) return this.#run(prepared, base, "consume", cost, nowMs, false, 0, signal);
    const sentAt = this.ownsClock ? monotonic() : nowMs;
    if (cache.size > 0) {
      const hit = cache.check(base, prepared.id, cost, sentAt);
      if (hit !== undefined) return hit;
    }
    return this.#run(prepared, base, "consume", cost, nowMs, true, sentAt, signal);
  }

  peek(set: PolicySet, key: string, nowMs: number, signal?: CallSignal): Promise<StoreResult> {
    return this.#run(this.#prepared.get(set) ?? this.#prepare(set), baseKey(set.prefix, key), "peek", 1, nowMs, false, 0, signal);
  }

  async refund(set: PolicySet, key: string, cost: number, nowMs: number, marks?: readonly number[]): Promise<void> {
    const base = baseKey(set.prefix, key);
    this.#cache?.forget(base);
    try {
      await this.#run(this.#prepared.get(set) ?? this.#prepare(set), base, "refund", cost, nowMs, false, 0, undefined, marks);
    } finally {
      // A consume sent meanwhile may have run before it in Redis (another connection, an HTTP
      // request): its denial, remembered or in flight, predates the refund.
      this.#cache?.forget(base);
    }
  }

  reserve(
    set: PolicySet,
    key: string,
    cost: number,
    nowMs: number,
    id: string,
    ttlMs: number,
    signal?: CallSignal,
  ): Promise<StoreResult> | StoreResult {
    const prepared = this.#prepared.get(set) ?? this.#prepare(set);
    const base = baseKey(set.prefix, key);
    const cache = prepared.cacheable ? this.#cache : undefined;
    const sentAt = cache === undefined ? 0 : this.ownsClock ? monotonic() : nowMs;
    if (cache !== undefined && cache.size > 0) {
      const hit = cache.check(base, prepared.id, cost, sentAt);
      if (hit !== undefined) return hit;
    }
    return this.#reserve(prepared, base, cost, nowMs, id, ttlMs, cache, sentAt, signal);
  }

  async settle(set: PolicySet, key: string, id: string, actual: number, nowMs: number): Promise<boolean> {
    const prepared = this.#prepared.get(set) ?? this.#prepare(set);
    const base = baseKey(set.prefix, key);
    const keys = keysOf(base, prepared.count);
    keys.push(ledgerKey(base, id));
    this.#cache?.forget(base);
    try {
      const reply = await this.#script(
        reservationScripts().settle,
        keys,
        [String(actual), ...prepared.multiTail, this.#now(nowMs)],
        "settle",
      );
      if (reply !== 0 && reply !== 1) {
        throw new FloodgateError(
          "STORE_ERROR",
          `${this.name} store: settle got an unexpected reply from Redis (${describeValue(reply)}); expected 0 or 1.`,
        );
      }
      return reply === 1;
    } finally {
      // As in refund: a denial remembered meanwhile predates the units given back.
      this.#cache?.forget(base);
    }
  }

  async #reserve(
    prepared: Prepared,
    base: string,
    cost: number,
    nowMs: number,
    id: string,
    ttlMs: number,
    cache: DenyCache | undefined,
    sentAt: number,
    signal: CallSignal | undefined,
  ): Promise<StoreResult> {
    const keys = keysOf(base, prepared.count);
    keys.push(ledgerKey(base, id));
    const generation = cache?.generation ?? 0;
    const reply = await this.#script(
      reservationScripts().reserve,
      keys,
      [String(cost), ...prepared.multiTail, this.#now(nowMs), String(ttlMs), ...prepared.blocks],
      "reserve",
      signal,
    );
    const length = 1 + prepared.count * FIELDS_PER_POLICY + (Array.isArray(reply) && reply[0] === 1 ? prepared.count : 0);
    if (!isResult(reply, length)) {
      throw new FloodgateError(
        "STORE_ERROR",
        `${this.name} store: reserve got an unexpected reply from Redis (${
          describeValue(reply)
        }); expected an array of ${length} integers.`,
      );
    }
    if (cache !== undefined && reply[0] === 0 && cache.generation === generation) {
      cache.remember(base, prepared.id, cost, sentAt, reply, prepared.limits);
    }
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
      if (signal?.aborted === true) {
        throw new FloodgateError(
          "STORE_TIMEOUT",
          `${this.name} store: ${op} was abandoned before the script was loaded; it was not sent again.`,
        );
      }
      try {
        return await this.#transport.eval(script.source, keys, args);
      } catch (retryError) {
        throw storeError(this.name, op, retryError);
      }
    }
  }

  /** A leased decision: see {@link RateLimitStore.lease} and lease-store.ts. */
  lease(set: PolicySet, key: string, request: LeaseRequest, nowMs: number, signal?: CallSignal): Promise<StoreResult> {
    const prepared = this.#prepared.get(set) ?? this.#prepare(set);
    const base = baseKey(set.prefix, key);
    const ctx = {
      name: this.name,
      ownsClock: this.ownsClock,
      transport: this.#transport,
      cache: this.#cache,
      setId: prepared.id,
      limits: prepared.limits,
    };
    return leaseCall(ctx, set, base, keysOf(base, prepared.count), request, nowMs, signal);
  }

  async reset(set: PolicySet, key: string): Promise<void> {
    const base = baseKey(set.prefix, key);
    this.#cache?.forget(base);
    const keys = keysOf(base, set.policies.length);
    keys.push(`${base}:b`);
    try {
      await this.#transport.del(keys);
    } catch (error) {
      throw storeError(this.name, "reset", error);
    } finally {
      this.#cache?.forget(base); // as in refund
    }
  }

  async penalty(set: PolicySet, key: string, cost: number, nowMs: number): Promise<void> {
    await this.#admin(set, key, "p", cost, nowMs);
  }

  async block(set: PolicySet, key: string, durationMs: number, nowMs: number): Promise<void> {
    await this.#admin(set, key, "b", durationMs, nowMs);
  }

  async unblock(set: PolicySet, key: string): Promise<void> {
    const base = baseKey(set.prefix, key);
    this.#cache?.forget(base);
    try {
      await this.#transport.del([`${base}:b`]);
    } catch (error) {
      throw storeError(this.name, "unblock", error);
    } finally {
      this.#cache?.forget(base); // as in refund
    }
  }

  dispose(): void {
    this.#cache?.clear();
  }

  /** A penalty ("p") or a manual block ("b"), in the admin script. */
  async #admin(set: PolicySet, key: string, op: "p" | "b", amount: number, nowMs: number): Promise<void> {
    const prepared = this.#prepared.get(set) ?? this.#prepare(set);
    const keys = keysOf(baseKey(set.prefix, key), prepared.count);
    const args = [op, String(amount), this.ownsClock ? "" : String(toMicros(nowMs)), ...prepared.multiTail];
    const script = luaScripts().admin;
    const what = op === "p" ? "penalty" : "block";
    try {
      await this.#transport.evalsha(script.sha, keys, args);
    } catch (error) {
      if (!isNoScript(error)) throw storeError(this.name, what, error);
      try {
        await this.#transport.eval(script.source, keys, args);
      } catch (retryError) {
        throw storeError(this.name, what, retryError);
      }
    }
  }

  /**
   * One script call. An async function on purpose: it awaits the client's promise once, exactly
   * the hop a `.then` would take, and keeps its per-call state without allocating closures.
   * `remember`: a consume with the deny cache on, sent at `sentAt` (the cache's clock).
   * `signal`: once aborted, the caller has stopped waiting, and no EVAL follows a NOSCRIPT (it
   * would charge a request that already got another answer).
   */
  async #run(
    prepared: Prepared,
    base: string,
    op: Op,
    cost: number,
    nowMs: number,
    remember: boolean,
    sentAt: number,
    signal?: CallSignal,
    marks?: readonly number[],
  ): Promise<StoreResult> {
    const keys = keysOf(base, prepared.count);
    let args: readonly string[];
    if (this.ownsClock && cost === 1 && op !== "refund") args = op === "consume" ? prepared.consume1 : prepared.peek;
    else {
      const list = [op === "consume" ? String(cost) : op === "peek" ? "0" : String(-cost), ...prepared.tail];
      const after = marks ?? (op === "consume" && prepared.blocks.length > 0 ? prepared.blocks : undefined);
      // The marks (or blocks) follow the time, which is then always sent: "" for the server's clock.
      if (!this.ownsClock) list.push(String(toMicros(nowMs)));
      else if (after !== undefined) list.push("");
      if (after !== undefined) { for (const mark of after) list.push(String(mark)); }
      args = list;
    }
    const script = prepared.script;
    // A refund or reset sent while this consume is in flight may run after it in Redis.
    const generation = remember ? this.#cache!.generation : 0;
    let reply: unknown;
    try {
      reply = await this.#transport.evalsha(script.sha, keys, args);
    } catch (error) {
      if (!isNoScript(error)) throw storeError(this.name, op, error);
      if (signal?.aborted === true) {
        throw new FloodgateError(
          "STORE_TIMEOUT",
          `${this.name} store: ${op} was abandoned before the script was loaded; it was not sent again.`,
        );
      }
      try {
        reply = await this.#transport.eval(script.source, keys, args);
      } catch (retryError) {
        throw storeError(this.name, op, retryError);
      }
    }
    if (op === "refund") return NO_RESULT;
    // A charged admission carries one mark per policy after the figures.
    const length = 1 + prepared.count * FIELDS_PER_POLICY +
      (op === "consume" && Array.isArray(reply) && reply[0] === 1 ? prepared.count : 0);
    if (!isResult(reply, length)) {
      throw new FloodgateError(
        "STORE_ERROR",
        `${this.name} store: ${op} got an unexpected reply from Redis (${describeValue(reply)}); expected an array of ${length} integers.`,
      );
    }
    const result = reply;
    if (remember && result[0] === 0 && this.#cache!.generation === generation) {
      this.#cache!.remember(base, prepared.id, cost, sentAt, result, prepared.limits);
    }
    return result;
  }

  #prepare(set: PolicySet): Prepared {
    const tail: string[] = [];
    const multiTail: string[] = [];
    // A policy's block is applied by the multi-policy script, one policy or several.
    const blocking = set.policies.some((p) => p.blockMs > 0);
    const multi = set.policies.length > 1 || blocking;
    for (const p of set.policies) {
      const lua = ALGORITHMS[p.kind].lua;
      if (lua.maxLimit !== undefined && p.limit > lua.maxLimit) {
        throw new FloodgateError(
          "INVALID_ARGUMENT",
          `${this.name} store: ${
            p.kind.replace(/-/g, " ")
          } "${p.name}" has limit ${p.limit}; Redis stores accept ${p.kind} limits up to ${lua.maxLimit}.`,
        );
      }
      if (multi) tail.push(lua.code);
      tail.push(String(p.limit), String(lua.parameter(p)));
      multiTail.push(lua.code, String(p.limit), String(lua.parameter(p)));
    }
    const blocks = blocking ? set.policies.map((p) => String(p.blockMs)) : [];
    const scripts = luaScripts();
    const prepared: Prepared = Object.freeze({
      id: this.#nextId++,
      script: multi ? scripts.multi : scripts[set.policies[0]!.kind],
      count: set.policies.length,
      limits: Object.freeze(set.policies.map((p) => p.limit)),
      tail: Object.freeze(tail),
      consume1: Object.freeze(blocking ? ["1", ...tail, "", ...blocks] : ["1", ...tail]),
      peek: Object.freeze(["0", ...tail]),
      blocks: Object.freeze(blocks),
      multiTail: Object.freeze(multiTail),
      cacheable: set.policies.every((p) => traitsOf(p).cachesDenials),
    });
    this.#prepared.set(set, prepared);
    return prepared;
  }
}

/** A character `baseKey` escapes: `%`, `}` or a surrogate (only lone ones are escaped). */
const NEEDS_ESCAPE = /[%}\uD800-\uDFFF]/;
/** A surrogate pair (kept) or a lone surrogate (escaped: UTF-8 encodes every one as U+FFFD). No lookbehind: older Safari lacks it. */
const SURROGATES = /[\uD800-\uDBFF][\uDC00-\uDFFF]|[\uD800-\uDFFF]/g;
const escapeLone = (s: string): string => (s.length === 2 ? s : `%u${s.charCodeAt(0).toString(16).toUpperCase()}`);

/**
 * `prefix{identifier}` with `%` and `}` escaped, so the hash tag always ends where the
 * identifier does: no identifier can spell another's keys, and all keys of one identifier share
 * one Redis Cluster slot. (The limiter's prefix never contains `{` or `}`.) A lone surrogate is
 * written `%uD800`: clients send keys as UTF-8, which would turn every one into U+FFFD. The first
 * policy's key is exactly that; further policies append `:1`, `:2`, ... (the short key keeps an
 * identifier's one integer within rate-limiter-flexible's `rlflx:<id>` footprint).
 */
export function baseKey(prefix: string, key: string): string {
  const escaped = NEEDS_ESCAPE.test(key) ? key.replace(/%/g, "%25").replace(/\}/g, "%7D").replace(SURROGATES, escapeLone) : key;
  return `${prefix}{${escaped}}`;
}

function keysOf(base: string, count: number): string[] {
  if (count === 1) return [base];
  const keys = new Array<string>(count);
  keys[0] = base;
  for (let p = 1; p < count; p++) keys[p] = `${base}:${p}`;
  return keys;
}

function storeError(name: string, what: string, error: unknown): FloodgateError {
  if (error instanceof FloodgateError) return error;
  // Not String(): it throws for an object without a prototype.
  const message = error instanceof Error ? error.message : describeValue(error);
  return new FloodgateError("STORE_ERROR", `${name} store: ${what} failed: ${message}`, { cause: error });
}
