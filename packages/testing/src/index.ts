/**
 * The store contract suite, for authors of stores: `storeContract(name, setup, options)` runs
 * every test Floodgate's own stores pass against yours, in your vitest (or Deno, or Bun) run.
 *
 * @module @floodgate/testing
 */
export { storeContract } from "./contract.ts";
export {
  clearOfHourBoundary,
  type ContractContext,
  example,
  hourly,
  KINDS,
  retentionMs,
  type StoreContractOptions,
  type StoreHarness,
  type Timed,
  timedLimiter,
  uniquePrefix,
  windowed,
} from "./support.ts";
