import { hasMethods, type OptionSpecs, parseOptions } from "../../validation.ts";
import { type RedisScriptStore, SCRIPT_STORE_OPTIONS, scriptStore, type ScriptStoreOptions, type ScriptTransport } from "./script-store.ts";

/** The part of an ioredis client (`Redis` or `Cluster`) the store uses. */
export interface IORedisLike {
  /** Runs a loaded script by its SHA1 (`EVALSHA`); rejects with a `NOSCRIPT` error when the server does not have it. */
  evalsha(sha1: string, numkeys: number, ...keysAndArgs: string[]): Promise<unknown>;
  /** Runs a script from its source (`EVAL`), which also loads it; used only after `NOSCRIPT`. */
  eval(script: string, numkeys: number, ...keysAndArgs: string[]): Promise<unknown>;
  /** Deletes keys (`DEL`): `reset()` uses it. */
  del(...keys: string[]): Promise<unknown>;
}

/** The part of a node-redis v5/v6 client (`createClient()` or `createCluster()`) the store uses. */
export interface NodeRedisLike {
  /** Runs a loaded script by its SHA1 (`EVALSHA`); rejects with a `NOSCRIPT` error when the server does not have it. */
  evalSha(sha1: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>;
  /** Runs a script from its source (`EVAL`), which also loads it; used only after `NOSCRIPT`. */
  eval(script: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>;
  /** Deletes keys (`DEL`): `reset()` uses it. */
  del(keys: string[]): Promise<unknown>;
}

/** Options of {@link redisStore}. */
export interface RedisStoreOptions extends ScriptStoreOptions {
  /** A connected ioredis `Redis` or `Cluster`, or a node-redis v5/v6 client or cluster. */
  client: IORedisLike | NodeRedisLike;
}

const isNodeRedis = /* @__PURE__ */ hasMethods("evalSha", "eval", "del");
// Built on first use.
let OPTIONS: OptionSpecs | undefined;

/**
 * Creates a store that keeps limiter state in Redis, Valkey or Redis Cluster over TCP, through
 * the caller's ioredis or node-redis client. Each decision is one atomic Lua script call
 * (EVALSHA; EVAL only when the server answers NOSCRIPT), on the Redis server's clock.
 *
 * @param options.client - ioredis `Redis`/`Cluster` or node-redis client (the caller owns it)
 * @param options.clock - `"server"` (default) or `"local"`
 * @param options.denyCache - answer already-denied identifiers locally (default `true`)
 * @param options.denyCacheMaxKeys - bound of the deny cache (default 10,000)
 * @example
 * import { Redis } from "ioredis";
 * const limiter = createRateLimiter({
 *   policy: [tokenBucket({ capacity: 20, refillRate: 5 }), fixedWindow({ limit: 1000, window: "1d" })],
 *   store: redisStore({ client: new Redis(process.env.REDIS_URL) }),
 * });
 */
export function redisStore(options: RedisStoreOptions): RedisScriptStore {
  const o = parseOptions<RedisStoreOptions>(
    options,
    "redisStore()",
    OPTIONS ??= {
      client: [
        (v) => isNodeRedis(v) || hasMethods("evalsha", "eval", "del")(v),
        "an ioredis Redis or Cluster instance, or a node-redis v5/v6 client (createClient() / createCluster())",
        1,
      ],
      ...SCRIPT_STORE_OPTIONS,
    },
  );
  const client = o.client;
  let transport: ScriptTransport;
  if (isNodeRedis(client)) {
    // node-redis copies `arguments` into its command (it never keeps or changes the array).
    const c = client as NodeRedisLike;
    transport = {
      evalsha: (sha, keys, args) => c.evalSha(sha, { keys, arguments: args as string[] }),
      eval: (source, keys, args) => c.eval(source, { keys, arguments: args as string[] }),
      del: (keys) => c.del(keys),
    };
  } else {
    const c = client as IORedisLike;
    transport = {
      // The usual call (one policy on the server's clock: one key, three ARGV) spelled out: no
      // spread, no intermediate array.
      evalsha: (sha, keys, args) =>
        keys.length === 1 && args.length === 3
          ? c.evalsha(sha, 1, keys[0]!, args[0]!, args[1]!, args[2]!)
          : c.evalsha(sha, keys.length, ...keys, ...args),
      eval: (source, keys, args) => c.eval(source, keys.length, ...keys, ...args),
      del: (keys) => c.del(...keys),
    };
  }
  return scriptStore("redis", transport, o);
}
