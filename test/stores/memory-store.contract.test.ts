import { memoryStore } from "../../packages/core/src/index.ts";
import { storeContract } from "./store-contract.ts";

storeContract("memoryStore", async () => ({
  store: () => memoryStore(),
  close: async () => undefined,
}));
