// The store contract on durableObjectStore running in workerd (miniflare), with real Durable
// Objects: every call of the suite goes to a Worker, whose store calls RateLimiterObject over RPC.
// Fails (never skips) when miniflare/workerd or the build is missing.
//   npm run build -w packages/core -w packages/cloudflare && npx vitest run test/cloudflare
import type { Miniflare } from "miniflare";
import { afterAll, beforeAll, describe } from "vitest";
import { equivalenceTraces } from "../stores/equivalence-traces.ts";
import { leaseChecks } from "../stores/lease-checks.ts";
import { storeContract } from "../stores/store-contract.ts";
import { bridgedStore, startWorkers } from "./harness.ts";

let mf: Miniflare | undefined;
storeContract("durableObjectStore (workerd, one object per key)", async () => {
  mf = await startWorkers();
  return {
    store: (clock) => bridgedStore(mf!, "a", clock === "server" ? "object" : "caller"),
    close: async () => {
      await mf?.dispose();
    },
  };
});

let sharded: Miniflare | undefined;
storeContract("durableObjectStore (workerd, keys over 4 shards)", async () => {
  sharded = await startWorkers();
  return {
    store: (clock) => bridgedStore(sharded!, "b", clock === "server" ? "object" : "caller", 4),
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
