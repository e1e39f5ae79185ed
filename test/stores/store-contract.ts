/**
 * THE store contract suite ships as @floodgate/testing (packages/testing): every store of this
 * repository (memory, the compare-and-set example, Upstash through the bridge, ioredis,
 * node-redis, ioredis Cluster) runs it, as a store author's own tests would. This module hands its
 * helpers to the other suites, with the Redis harness's extra: raw key TTLs (test/redis/key-ttls.ts).
 */
import type { StoreHarness as ContractHarness } from "../../packages/testing/src/index.ts";

export {
  clearOfHourBoundary,
  hourly,
  storeContract,
  type StoreContractOptions,
  uniquePrefix,
  windowed,
} from "../../packages/testing/src/index.ts";
export { KINDS } from "../support/kinds.ts";

/** A contract harness; a Redis one can also read the raw keys' TTLs. */
export interface StoreHarness extends ContractHarness {
  /** PTTL (ms) of raw Redis keys (-2 missing, -1 no TTL). */
  pttl?(keys: string[]): Promise<number[]>;
}
