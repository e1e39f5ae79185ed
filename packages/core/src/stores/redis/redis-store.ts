import { hasMethods, isBoolean, isFunction, type OptionSpecs, parseOptions } from "../../validation.ts";
import { type ReconnectOption, watchConnection } from "./client-connection.ts";
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
  /**
   * How the store gets a fresh connection when its resilient wrapper's circuit opens on timeouts
   * (a connection gone half-open times out every call sent on it, while new ones work): `true`
   * (default) a copy of the client (`client.duplicate()`, connected; the store closes it when it
   * moves on or is disposed), `false` to stay on the client, or a function returning a new
   * connected client (the store owns it likewise). The client you passed is never closed: commands
   * it has in flight keep their answers. Only a connection that has answered is replaced.
   */
  reconnect?: boolean | (() => unknown);
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
      reconnect: [
        (v) => isBoolean(v) || isFunction(v),
        "true (default: a duplicate() of the client), false, or a function returning a new connected client",
      ],
      ...SCRIPT_STORE_OPTIONS,
    },
  );
  const client = o.client;
  const nodeRedis = Boolean(isNodeRedis(client));
  return scriptStore(
    "redis",
    watchConnection(client, nodeRedis, (c) => transportOf(c, nodeRedis), o.reconnect as ReconnectOption | undefined),
    o,
  );
}

/** The store's three operations on a client of either kind. */
function transportOf(client: object, nodeRedis: boolean): ScriptTransport {
  if (nodeRedis) {
    // node-redis copies `arguments` into its command (it never keeps or changes the array).
    const c = client as NodeRedisLike;
    const raw = rawSender(client);
    return {
      evalsha: raw !== undefined
        ? (sha, keys, args) => raw.sendCommand(evalShaCommand(sha, keys, args))
        : (sha, keys, args) => c.evalSha(sha, { keys, arguments: args as string[] }),
      eval: (source, keys, args) => c.eval(source, { keys, arguments: args as string[] }),
      del: (keys) => c.del(keys),
    };
  }
  const c = client as IORedisLike;
  return {
    // The usual calls (one policy on the server's clock: one key, and two ARGV for a charge of
    // 1, three else) spelled out: no spread, no intermediate array.
    evalsha: (sha, keys, args) =>
      keys.length !== 1
        ? c.evalsha(sha, keys.length, ...keys, ...args)
        : args.length === 2
        ? c.evalsha(sha, 1, keys[0]!, args[0]!, args[1]!)
        : args.length === 3
        ? c.evalsha(sha, 1, keys[0]!, args[0]!, args[1]!, args[2]!)
        : c.evalsha(sha, 1, keys[0]!, ...args),
    eval: (source, keys, args) => c.eval(source, keys.length, ...keys, ...args),
    del: (keys) => c.del(...keys),
  };
}

/** A node-redis client's `sendCommand(args)`: the command as it goes on the wire, with the client's options. */
interface RawSender {
  sendCommand(args: string[]): Promise<unknown>;
  readonly isReady?: unknown;
  readonly masters?: unknown;
  readonly _keyPrefix?: unknown;
  readonly options?: { readonly keyPrefix?: unknown };
}

/**
 * A node-redis client (not a cluster, whose `sendCommand` takes a key first) with no `keyPrefix`
 * (which `evalSha` applies to the keys, and `sendCommand` does not): its `EVALSHA` is sent with
 * `sendCommand`, as `evalSha` sends it in the end, without the layers before (an argument parser
 * and two async functions per call); the reply is the same (`EVALSHA` transforms none).
 */
function rawSender(client: object): RawSender | undefined {
  const c = client as RawSender;
  const prefixed = Boolean(c._keyPrefix) || Boolean(c.options?.keyPrefix);
  return typeof c.sendCommand === "function" && typeof c.isReady === "boolean" && !("masters" in c) && !prefixed ? c : undefined;
}

/** `EVALSHA sha numkeys ...keys ...args`; the usual call (one key, two or three ARGV) spelled out. */
function evalShaCommand(sha: string, keys: string[], args: readonly string[]): string[] {
  if (keys.length === 1) {
    if (args.length === 2) return ["EVALSHA", sha, "1", keys[0]!, args[0]!, args[1]!];
    if (args.length === 3) return ["EVALSHA", sha, "1", keys[0]!, args[0]!, args[1]!, args[2]!];
  }
  return ["EVALSHA", sha, String(keys.length), ...keys, ...args];
}
