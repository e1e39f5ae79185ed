/**
 * Store harnesses over real Redis: each starts its own redis-server (or cluster, or bridge) and
 * stops exactly what it started.
 */
import { Redis as UpstashRedis } from "@upstash/redis";
import { Cluster, Redis as IORedis } from "ioredis";
import { createClient, createCluster } from "redis";
import { type RedisScriptStore, redisStore, upstashStore } from "../../packages/core/src/index.ts";
import { type RedisCluster, type RedisInstance, startRedis, startRedisCluster } from "../support/redis-server.ts";
import { startUpstashBridge, type UpstashBridge } from "../../packages/upstash-local/src/index.ts";
import type { StoreHarness } from "../stores/store-contract.ts";

export interface RedisHarness extends StoreHarness {
  store(clock: "server" | "local", options?: { denyCache?: boolean }): RedisScriptStore;
  /** An ioredis connection for inspection (PTTL, MEMORY USAGE, SCRIPT FLUSH). */
  admin: IORedis | Cluster;
}

export interface UpstashHarness extends RedisHarness {
  bridge: UpstashBridge;
  redis: RedisInstance;
  client: UpstashRedis;
}

const pttlOf = (admin: IORedis | Cluster) => async (keys: string[]): Promise<number[]> => Promise.all(keys.map((k) => admin.pttl(k)));

export async function ioredisHarness(): Promise<RedisHarness & { redis: RedisInstance; client: IORedis }> {
  const redis = await startRedis();
  const client = new IORedis(redis.port, redis.host, { lazyConnect: false, maxRetriesPerRequest: 1 });
  const admin = new IORedis(redis.port, redis.host);
  return {
    redis,
    client,
    admin,
    store: (clock, options) => redisStore({ client, clock, ...options }),
    pttl: pttlOf(admin),
    async close() {
      client.disconnect();
      admin.disconnect();
      await redis.stop();
    },
  };
}

export async function nodeRedisHarness(): Promise<RedisHarness & { redis: RedisInstance }> {
  const redis = await startRedis();
  const client = createClient({ socket: { host: redis.host, port: redis.port } });
  await client.connect();
  const admin = new IORedis(redis.port, redis.host);
  return {
    redis,
    admin,
    store: (clock, options) => redisStore({ client, clock, ...options }),
    pttl: pttlOf(admin),
    async close() {
      client.destroy();
      admin.disconnect();
      await redis.stop();
    },
  };
}

export async function upstashHarness(): Promise<UpstashHarness> {
  const redis = await startRedis();
  const bridge = await startUpstashBridge({ redis: { host: redis.host, port: redis.port } });
  const client = new UpstashRedis({ url: bridge.url, token: bridge.token, enableTelemetry: false });
  const admin = new IORedis(redis.port, redis.host);
  return {
    redis,
    bridge,
    client,
    admin,
    store: (clock, options) => upstashStore({ redis: client, clock, ...options }),
    pttl: pttlOf(admin),
    async close() {
      admin.disconnect();
      await bridge.stop();
      await redis.stop();
    },
  };
}

/** ioredis `Cluster` on a 3-master cluster (started here unless one is given; then the caller stops it). */
export async function clusterHarness(shared?: RedisCluster): Promise<RedisHarness> {
  const cluster = shared ?? (await startRedisCluster());
  const client = new Cluster(cluster.startupNodes, { redisOptions: { maxRetriesPerRequest: 1 } });
  const admin = new Cluster(cluster.startupNodes);
  return {
    admin,
    store: (clock, options) => redisStore({ client, clock, ...options }),
    pttl: pttlOf(admin),
    async close() {
      client.disconnect();
      admin.disconnect();
      if (shared === undefined) await cluster.stop();
    },
  };
}

/** node-redis `createCluster()` on a 3-master cluster (started here unless one is given). */
export async function nodeRedisClusterHarness(shared?: RedisCluster): Promise<RedisHarness> {
  const cluster = shared ?? (await startRedisCluster());
  const client = createCluster({ rootNodes: cluster.startupNodes.map((n) => ({ socket: { host: n.host, port: n.port } })) });
  await client.connect();
  const admin = new Cluster(cluster.startupNodes);
  return {
    admin,
    store: (clock, options) => redisStore({ client, clock, ...options }),
    pttl: pttlOf(admin),
    async close() {
      client.destroy();
      admin.disconnect();
      if (shared === undefined) await cluster.stop();
    },
  };
}

/**
 * The Redis commands `run` made, by name (`INFO commandstats` around it, the server's own CONFIG
 * and INFO left out), e.g. `{ evalsha: 1, time: 1, get: 1 }`.
 */
export async function commandsOf(admin: IORedis, run: () => Promise<unknown>): Promise<Record<string, number>> {
  await admin.config("RESETSTAT");
  await run();
  const info = (await admin.info("commandstats")) as string;
  const calls: Record<string, number> = {};
  for (const [, name, n] of info.matchAll(/cmdstat_([a-z|]+):calls=(\d+)/g)) {
    if (!name!.startsWith("config") && !name!.startsWith("info")) calls[name!] = Number(n);
  }
  return calls;
}
