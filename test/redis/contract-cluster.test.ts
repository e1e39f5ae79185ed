/** The store contract on a 3-master Redis Cluster started here, through ioredis and node-redis. */
import { afterAll, beforeAll } from "vitest";
import { storeContract } from "../stores/store-contract.ts";
import { type RedisCluster, startRedisCluster } from "../support/redis-server.ts";
import { clusterHarness, nodeRedisClusterHarness } from "./harness.ts";
import { redisKeyContract } from "./key-ttls.ts";

let cluster: RedisCluster;
beforeAll(async () => {
  cluster = await startRedisCluster();
}, 60_000);
afterAll(async () => {
  await cluster?.stop();
});

storeContract("redisStore (ioredis Cluster, 3 masters)", () => clusterHarness(cluster));
storeContract("redisStore (node-redis createCluster, 3 masters)", () => nodeRedisClusterHarness(cluster));
redisKeyContract("redisStore (ioredis Cluster, 3 masters)", () => clusterHarness(cluster));
