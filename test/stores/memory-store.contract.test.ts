import { memoryStore } from "../../packages/core/src/index.ts";
import { storeContract } from "./store-contract.ts";

// The memory store leases nothing (its decisions cost no round trip), and two of its instances
// share nothing: no lease tests, no racing clients.
storeContract("memoryStore", async () => ({
  store: () => memoryStore(),
  close: async () => undefined,
}), { leases: false, clients: false });
