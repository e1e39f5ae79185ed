// The store contract on durableObjectStore running in workerd (miniflare), with real Durable
// Objects: every call of the suite goes to a Worker, whose store calls RateLimiterObject over RPC.
// Fails (never skips) when miniflare/workerd or the build is missing.
//   npm run build -w packages/core -w packages/cloudflare && npx vitest run test/cloudflare
import type { Miniflare } from "miniflare";
import { afterAll, beforeAll, describe } from "vitest";
import { equivalenceTraces } from "../stores/equivalence-traces.ts";
import { leaseChecks } from "../stores/lease-checks.ts";
import { storeContract } from "../stores/store-contract.ts";
import { resilientStore } from "../../packages/core/src/index.ts";
import { bridgedStore, startWorkers } from "./harness.ts";

/**
 * The suite's limiters keep the default resilience, whose 1 s deadline measures the round trip
 * from Node into miniflare as much as the store: on a loaded machine that trip alone can exceed
 * it. The contract is about what the store decides, so its calls get 10 s.
 */
const patient = (store: ReturnType<typeof bridgedStore>) => resilientStore(store, { timeoutMs: 10_000 });

let mf: Miniflare | undefined;
storeContract("durableObjectStore (workerd, one object per key)", async () => {
  mf = await startWorkers();
  return {
    store: (clock) => patient(bridgedStore(mf!, "a", clock === "server" ? "object" : "caller")),
    close: async () => {
      await mf?.dispose();
    },
  };
});

let sharded: Miniflare | undefined;
storeContract("durableObjectStore (workerd, keys over 4 shards)", async () => {
  sharded = await startWorkers();
  return {
    store: (clock) => patient(bridgedStore(sharded!, "b", clock === "server" ? "object" : "caller", 4)),
    close: async () => {
      await sharded?.dispose();
    },
  };
});

describe("durableObjectStore (workerd): equivalence and leased mode", () => {
  let traces: Miniflare | undefined;
  beforeAll(async () => {
    traces = await startWorkers();
  });
  afterAll(async () => {
    await traces?.dispose();
  });
  equivalenceTraces(() => bridgedStore(traces!, "a", "caller"));
  leaseChecks(() => bridgedStore(traces!, "b", "caller"));
});
