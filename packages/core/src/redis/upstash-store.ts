import * as z from "zod/mini";
import { describeValue, FloodgateError } from "../errors.ts";
import { parseOptions } from "../validation.ts";
import { SCRIPT_STORE_ACCEPTED, ScriptStore, scriptStoreShape, type RedisScriptStore, type ScriptStoreOptions } from "./script-store.ts";

/**
 * The part of an `@upstash/redis` `Redis` instance the store uses. Typed structurally so any
 * client version with these methods fits, and core depends on no client package.
 */
export interface UpstashRedisLike {
  evalsha(sha1: string, keys: string[], args: string[]): Promise<unknown>;
  eval(script: string, keys: string[], args: string[]): Promise<unknown>;
  del(...keys: string[]): Promise<unknown>;
}

/** Options of {@link upstashStore}. */
export interface UpstashStoreOptions extends ScriptStoreOptions {
  /** An `@upstash/redis` client: `new Redis({ url, token })` or `Redis.fromEnv()`. */
  redis: UpstashRedisLike;
}

const ACCEPTED = {
  redis: "an @upstash/redis Redis instance (an object with evalsha, eval and del methods)",
  ...SCRIPT_STORE_ACCEPTED,
};
const schema = z.strictObject({ redis: z.any(), ...scriptStoreShape });

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
  const o = parseOptions(schema, options, "upstashStore()", ACCEPTED);
  const redis = o.redis as UpstashRedisLike;
  if (typeof redis !== "object" || redis === null || typeof redis.evalsha !== "function" || typeof redis.eval !== "function" || typeof redis.del !== "function") {
    throw new FloodgateError("INVALID_OPTION", `upstashStore(): invalid option \`redis\`: received ${describeValue(o.redis)}; expected ${ACCEPTED.redis}.`);
  }
  // @upstash/redis copies `args` into its command (it never keeps or changes the array).
  return new ScriptStore("upstash", {
    evalsha: (sha, keys, args) => redis.evalsha(sha, keys, args as string[]),
    eval: (source, keys, args) => redis.eval(source, keys, args as string[]),
    del: (keys) => redis.del(...keys),
  }, o);
}
