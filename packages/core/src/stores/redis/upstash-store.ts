import { hasMethods, type OptionSpecs, parseOptions } from "../../validation.ts";
import { type RedisScriptStore, SCRIPT_STORE_OPTIONS, scriptStore, type ScriptStoreOptions } from "./script-store.ts";

/**
 * The part of an `@upstash/redis` `Redis` instance the store uses. Typed structurally so any
 * client version with these methods fits, and core depends on no client package.
 */
export interface UpstashRedisLike {
  /** Runs a loaded script by its SHA1 (`EVALSHA`); rejects with a `NOSCRIPT` error when the server does not have it. */
  evalsha(sha1: string, keys: string[], args: string[]): Promise<unknown>;
  /** Runs a script from its source (`EVAL`), which also loads it; used only after `NOSCRIPT`. */
  eval(script: string, keys: string[], args: string[]): Promise<unknown>;
  /** Deletes keys (`DEL`): `reset()` uses it. */
  del(...keys: string[]): Promise<unknown>;
}

/** Options of {@link upstashStore}. */
export interface UpstashStoreOptions extends ScriptStoreOptions {
  /** An `@upstash/redis` client: `new Redis({ url, token })` or `Redis.fromEnv()`. */
  redis: UpstashRedisLike;
}

// Built on first use.
let OPTIONS: OptionSpecs | undefined;

/**
 * Creates a store that keeps limiter state in Upstash Redis over HTTP (serverless and edge
 * runtimes, where TCP sockets are unavailable). Each decision is one atomic Lua script call,
 * one HTTP request, on the Redis server's clock.
 *
 * @param options.redis - an `@upstash/redis` client (the caller owns it)
 * @param options.clock - `"server"` (default) or `"local"`
 * @param options.denyCache - answer already-denied identifiers locally (default `true`)
 * @param options.denyCacheMaxKeys - bound of the deny cache (default 10,000)
 * @example
 * import { Redis } from "@upstash/redis";
 * const limiter = createRateLimiter({
 *   policy: slidingWindow({ limit: 100, window: "1m" }),
 *   store: upstashStore({ redis: Redis.fromEnv() }),
 * });
 */
export function upstashStore(options: UpstashStoreOptions): RedisScriptStore {
  const o = parseOptions<UpstashStoreOptions>(
    options,
    "upstashStore()",
    OPTIONS ??= {
      redis: [hasMethods("evalsha", "eval", "del"), "an @upstash/redis Redis instance (an object with evalsha, eval and del methods)", 1],
      ...SCRIPT_STORE_OPTIONS,
    },
  );
  const redis = o.redis;
  // @upstash/redis copies `args` into its command (it never keeps or changes the array).
  return scriptStore("upstash", {
    evalsha: (sha, keys, args) => redis.evalsha(sha, keys, args as string[]),
    eval: (source, keys, args) => redis.eval(source, keys, args as string[]),
    del: (keys) => redis.del(...keys),
  }, o);
}
