import * as z from "zod/mini";
import { intervalUs, toMicros } from "../algorithms.ts";
import { describeValue, FloodgateError } from "../errors.ts";
import type { PolicySet, RateLimitStore, StoreResult } from "../store.ts";
import { DenyCache } from "./deny-cache.ts";
import { KIND_CODE, luaScripts, type LuaScript } from "./lua.ts";

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

/** The three operations a client adapter must provide. */
export interface ScriptTransport {
  evalsha(sha: string, keys: string[], args: string[]): Promise<unknown>;
  eval(source: string, keys: string[], args: string[]): Promise<unknown>;
  del(keys: string[]): Promise<unknown>;
}

export const SCRIPT_STORE_ACCEPTED = {
  clock: '"server" (default) or "local"',
  denyCache: "true (default) or false",
  denyCacheMaxKeys: "a whole number from 1 to 10000000 (default 10000)",
} as const;

export const scriptStoreShape = {
  clock: z.optional(z.enum(["server", "local"])),
  denyCache: z.optional(z.boolean()),
  denyCacheMaxKeys: z.optional(z.number().check(z.int(), z.minimum(1), z.maximum(10_000_000))),
};

/** Fixed-window counts are packed with a 20-bit window index into one exact double. */
const MAX_FIXED_WINDOW_LIMIT = 2 ** 32;

interface Prepared {
  readonly id: number;
  readonly script: LuaScript;
  /** Per policy: kind letter, limit, parameter. */
  readonly tail: readonly string[];
  readonly count: number;
  readonly limits: readonly number[];
}

const monotonic: () => number =
  typeof globalThis.performance?.now === "function" ? () => globalThis.performance.now() : () => Date.now();

function isNoScript(error: unknown): boolean {
  const message = error instanceof Error ? error.message : typeof error === "string" ? error : "";
  return message.toUpperCase().includes("NOSCRIPT");
}

/**
 * The engine both Redis stores share: one atomic script call per decision (EVALSHA, then EVAL
 * only on NOSCRIPT), keys `prefix{identifier}` (`:1`, `:2`... for further policies), an optional deny cache.
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

  consume(set: PolicySet, key: string, cost: number, nowMs: number): Promise<StoreResult> | StoreResult {
    const prepared = this.#prepare(set);
    const base = baseKey(set.prefix, key);
    const cache = this.#cache;
    let sentAt = 0;
    if (cache !== undefined) {
      sentAt = this.ownsClock ? monotonic() : nowMs;
      if (cache.size > 0) {
        const hit = cache.check(base, prepared.id, cost, sentAt);
        if (hit !== undefined) return hit;
      }
    }
    if (cache === undefined) return this.#run(prepared, base, "0", cost, nowMs, undefined);
    return this.#run(prepared, base, "0", cost, nowMs, (r) => {
      if (r[0] === 0) cache.remember(base, prepared.id, cost, sentAt, r, prepared.limits);
    });
  }

  peek(set: PolicySet, key: string, nowMs: number): Promise<StoreResult> {
    return this.#run(this.#prepare(set), baseKey(set.prefix, key), "1", 1, nowMs, undefined);
  }

  async refund(set: PolicySet, key: string, cost: number, nowMs: number): Promise<void> {
    const base = baseKey(set.prefix, key);
    this.#cache?.forget(base);
    await this.#run(this.#prepare(set), base, "2", cost, nowMs, undefined);
  }

  async reset(set: PolicySet, key: string): Promise<void> {
    const base = baseKey(set.prefix, key);
    this.#cache?.forget(base);
    const keys = keysOf(base, set.policies.length);
    try {
      await this.#transport.del(keys);
    } catch (error) {
      throw storeError(this.name, "reset", error);
    }
  }

  dispose(): void {
    this.#cache?.clear();
  }

  #run(prepared: Prepared, base: string, op: string, cost: number, nowMs: number, onResult: ((r: StoreResult) => void) | undefined): Promise<StoreResult> {
    const keys = keysOf(base, prepared.count);
    const args = [op, String(cost), this.ownsClock ? "" : String(toMicros(nowMs)), ...prepared.tail];
    const script = prepared.script;
    const transport = this.#transport;
    const name = this.name;
    const what = op === "0" ? "consume" : op === "1" ? "peek" : "refund";
    const accept = (reply: unknown): StoreResult => {
      const result = checkReply(name, what, reply, op);
      if (onResult !== undefined) onResult(result);
      return result;
    };
    let first: Promise<unknown>;
    try {
      first = transport.evalsha(script.sha, keys, args);
    } catch (error) {
      return Promise.reject(storeError(name, what, error));
    }
    return first.then(
      accept,
      (error: unknown) => {
        if (!isNoScript(error)) throw storeError(name, what, error);
        return transport.eval(script.source, keys, args).then(
          accept,
          (retryError: unknown) => {
            throw storeError(name, what, retryError);
          },
        );
      },
    );
  }

  #prepare(set: PolicySet): Prepared {
    let prepared = this.#prepared.get(set);
    if (prepared !== undefined) return prepared;
    const tail: string[] = [];
    for (const p of set.policies) {
      if (p.kind === "fixed-window" && p.limit > MAX_FIXED_WINDOW_LIMIT) {
        throw new FloodgateError(
          "INVALID_ARGUMENT",
          `${this.name} store: fixed window "${p.name}" has limit ${p.limit}; Redis stores accept fixed-window limits up to ${MAX_FIXED_WINDOW_LIMIT}.`,
        );
      }
      if (set.policies.length > 1) tail.push(KIND_CODE[p.kind]);
      tail.push(String(p.limit), String(p.kind === "token-bucket" ? intervalUs(p) : p.windowMs));
    }
    const scripts = luaScripts();
    prepared = Object.freeze({
      id: this.#nextId++,
      script: set.policies.length === 1 ? scripts[set.policies[0]!.kind] : scripts.multi,
      tail: Object.freeze(tail),
      count: set.policies.length,
      limits: Object.freeze(set.policies.map((p) => p.limit)),
    });
    this.#prepared.set(set, prepared);
    return prepared;
  }
}

/**
 * `prefix{identifier}` with `%` and `}` escaped, so the hash tag always ends where the
 * identifier does: no identifier can spell another's keys, and all keys of one identifier share
 * one Redis Cluster slot. (The limiter's prefix never contains `{` or `}`.) The first policy's key
 * is exactly that; further policies append `:1`, `:2`, ... (the short key keeps an identifier's
 * one integer within rate-limiter-flexible's `rlflx:<id>` footprint).
 */
export function baseKey(prefix: string, key: string): string {
  const escaped = key.includes("%") || key.includes("}") ? key.replace(/%/g, "%25").replace(/\}/g, "%7D") : key;
  return `${prefix}{${escaped}}`;
}

function keysOf(base: string, count: number): string[] {
  if (count === 1) return [base];
  const keys = new Array<string>(count);
  keys[0] = base;
  for (let p = 1; p < count; p++) keys[p] = `${base}:${p}`;
  return keys;
}

function checkReply(name: string, what: string, reply: unknown, op: string): StoreResult {
  if (op === "2") return [];
  if (Array.isArray(reply)) return reply as number[];
  throw new FloodgateError("STORE_ERROR", `${name} store: ${what} got an unexpected reply from Redis (${describeValue(reply)}); expected an array of integers.`);
}

function storeError(name: string, what: string, error: unknown): FloodgateError {
  if (error instanceof FloodgateError) return error;
  const message = error instanceof Error ? error.message : String(error);
  return new FloodgateError("STORE_ERROR", `${name} store: ${what} failed: ${message}`, { cause: error });
}
