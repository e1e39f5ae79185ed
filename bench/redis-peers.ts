/**
 * The decisions `bench/redis.ts` times through each Redis client: Floodgate's fixed window, token
 * bucket and sliding window, and the peers that run on that client, all set up alike: a limit of
 * 100,000,000 per hour (every decision admits), each subject under a key prefix of its own.
 *
 * Peers, each called the way its users call it, with its defaults except what would keep a call
 * from reaching Redis:
 *  - rate-limiter-flexible `RateLimiterRedis` (fixed window; ioredis, and node-redis with
 *    `useRedisPackage`, where it sends its script with `EVAL` on every call);
 *  - rate-limit-redis, express-rate-limit's Redis store (fixed window), its `increment` called
 *    directly, over a `sendCommand` of the client (ioredis `call`, node-redis `sendCommand`);
 *  - @upstash/ratelimit's fixed window, sliding window and token bucket (@upstash/redis only),
 *    with analytics off (its default) and no ephemeral cache (`ephemeralCache: false`: a cached
 *    denial would answer without Redis; none happens here anyway). Its scripts open with
 *    `#!lua flags=allow-key-locking`, which vanilla Redis refuses: the client below strips the
 *    flag (which changes nothing the script computes) and maps the library's SHA1 to the stripped
 *    text's, so every call is one `EVALSHA`, as against Upstash.
 */
import { createHash } from "node:crypto";
import { Ratelimit } from "@upstash/ratelimit";
import type { Redis as UpstashRedis } from "@upstash/redis";
import type { Redis as IORedis } from "ioredis";
import { RedisStore } from "rate-limit-redis";
import { RateLimiterRedis } from "rate-limiter-flexible";
import type { Core } from "./copies.ts";

/** What the peers need of a node-redis client (rate-limiter-flexible calls its `eval`). */
export interface NodeRedis {
  sendCommand(args: string[]): Promise<unknown>;
}
type Store = Parameters<Core["createRateLimiter"]>[0]["store"];

/** The Floodgate algorithms timed, by their `--kinds` names. */
export const KINDS = ["fixed", "token", "sliding"] as const;
export type Kind = (typeof KINDS)[number];
export const KIND_NAMES: Record<Kind, string> = { fixed: "fixed window", token: "token bucket", sliding: "sliding window" };

const LIMIT = 100_000_000;
const HOUR_MS = 3_600_000;

/** One timed decision maker, and how to tell from its answer that it admitted (checked in the warm-up only). */
export interface Decider {
  readonly name: string;
  readonly decide: (id: string) => Promise<unknown>;
  readonly admits: (answer: unknown) => boolean;
}

/** The kinds named by `--kinds a,b` (all three without it). */
export function kindsOf(argv: readonly string[] = process.argv): Kind[] {
  const i = argv.indexOf("--kinds");
  if (i === -1) return [...KINDS];
  const kinds = (argv[i + 1] ?? "").split(",").filter(Boolean);
  const unknown = kinds.filter((k) => !(KINDS as readonly string[]).includes(k));
  if (kinds.length === 0 || unknown.length > 0) throw new Error(`--kinds takes a list of ${KINDS.join(", ")}; got ${argv[i + 1]}`);
  return KINDS.filter((k) => kinds.includes(k));
}

/** A Floodgate limiter of one kind over `store`, as a decider. */
export function floodgate(core: Core, kind: Kind, store: Store, prefix: string, name: string): Decider {
  const policy = kind === "fixed"
    ? core.fixedWindow({ limit: LIMIT, window: "1h" })
    : kind === "token"
    ? core.tokenBucket({ capacity: LIMIT, refillRate: LIMIT / 3600 })
    : core.slidingWindow({ limit: LIMIT, window: "1h" });
  const limiter = core.createRateLimiter({ policy, store, prefix });
  return {
    name,
    decide: (id) => limiter.limit(id),
    admits: (d) => (d as { allowed: boolean; source: string }).allowed && (d as { source: string }).source === "store",
  };
}

const rlfAdmits = (r: unknown): boolean => (r as { remainingPoints: number }).remainingPoints > 0;
const rlrAdmits = (r: unknown): boolean => (r as { totalHits: number }).totalHits >= 1;

async function rateLimitRedis(sendCommand: (...args: string[]) => Promise<unknown>, prefix: string): Promise<RedisStore> {
  const store = new RedisStore({ sendCommand: sendCommand as (...args: string[]) => Promise<never>, prefix });
  await store.init({ windowMs: HOUR_MS } as Parameters<RedisStore["init"]>[0]);
  return store;
}

/** The peers that run on ioredis. */
export async function ioredisPeers(io: IORedis): Promise<Decider[]> {
  const rlf = new RateLimiterRedis({ storeClient: io, points: LIMIT, duration: HOUR_MS / 1000, keyPrefix: "p1" });
  const rlr = await rateLimitRedis((command, ...args) => io.call(command!, ...args), "p2:");
  return [
    { name: "rate-limiter-flexible RateLimiterRedis, fixed window", decide: (id) => rlf.consume(id), admits: rlfAdmits },
    { name: "rate-limit-redis increment, fixed window", decide: (id) => rlr.increment(id), admits: rlrAdmits },
  ];
}

/** The peers that run on node-redis. */
export async function nodeRedisPeers(node: NodeRedis): Promise<Decider[]> {
  const rlf = new RateLimiterRedis({ storeClient: node, useRedisPackage: true, points: LIMIT, duration: HOUR_MS / 1000, keyPrefix: "p3" });
  const rlr = await rateLimitRedis((...args) => node.sendCommand(args), "p4:");
  return [
    { name: "rate-limiter-flexible RateLimiterRedis, fixed window", decide: (id) => rlf.consume(id), admits: rlfAdmits },
    { name: "rate-limit-redis increment, fixed window", decide: (id) => rlr.increment(id), admits: rlrAdmits },
  ];
}

/** @upstash/redis without the Upstash-only shebang flag of @upstash/ratelimit's scripts (see above). */
export function acceptedByVanillaRedis(redis: UpstashRedis): UpstashRedis {
  const FLAG = /^#!lua flags=allow-key-locking\n/;
  const sha1 = (text: string) => createHash("sha1").update(text).digest("hex");
  const stripped = new Map<string, string>();
  return new Proxy(redis, {
    get(target, property, receiver) {
      if (property === "eval") {
        return (script: string, keys: string[], args: unknown[]) => {
          const text = script.replace(FLAG, "");
          stripped.set(sha1(script), sha1(text));
          return target.eval(text, keys, args);
        };
      }
      if (property === "evalsha") {
        return (sha: string, keys: string[], args: unknown[]) => target.evalsha(stripped.get(sha) ?? sha, keys, args);
      }
      return Reflect.get(target, property, receiver);
    },
  });
}

/** The peers that run on @upstash/redis: @upstash/ratelimit's three algorithms. */
export function upstashPeers(redis: UpstashRedis): Decider[] {
  const client = acceptedByVanillaRedis(redis);
  const limiters: [string, ConstructorParameters<typeof Ratelimit>[0]["limiter"]][] = [
    ["fixed window", Ratelimit.fixedWindow(LIMIT, "1 h")],
    ["sliding window", Ratelimit.slidingWindow(LIMIT, "1 h")],
    ["token bucket", Ratelimit.tokenBucket(LIMIT, "1 h", LIMIT)],
  ];
  return limiters.map(([algorithm, limiter], n) => {
    const l = new Ratelimit({ redis: client, limiter, prefix: `p5${n}`, analytics: false, ephemeralCache: false, enableTelemetry: false });
    return {
      name: `@upstash/ratelimit, ${algorithm}`,
      decide: (id: string) => l.limit(id),
      // A timeout answers success with reason "timeout": only an answer from Redis counts.
      admits: (r: unknown) => (r as { success: boolean }).success && (r as { reason?: string }).reason === undefined,
    };
  });
}
