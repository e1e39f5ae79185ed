/**
 * For authors of stores: the one contract between a rate limiter and where its state lives, and
 * what a store needs to keep it. A store implements {@link RateLimitStore}; a store on a database
 * that cannot run code beside its data builds each operation on {@link evaluateState} (read, decide,
 * write if unchanged). Applications import `@floodgate/core` and a store instead.
 * docs/writing-a-store.md walks through a complete store.
 *
 * @module @floodgate/core/store
 */
export { FloodgateError, type FloodgateErrorCode } from "../errors.ts";
export type { Policy, PolicyKind } from "../policy.ts";
export {
  answeredLocally,
  type CallSignal,
  type HeldReservation,
  isThenable,
  type LeaseRequest,
  type LeaseReturn,
  type LocalStoreResult,
  type ManyCall,
  type MaybePromise,
  type PolicySet,
  type RateLimitStore,
  sourceOf,
  type StoreResult,
  type StoreSource,
} from "./store.ts";
export { evaluateState } from "./state/evaluate.ts";
export {
  type EvaluateMode,
  type KeyState,
  LEASE_RECORD_GRACE_MS,
  MAX_RESERVATIONS_PER_KEY,
  type ReservationArgs,
  type StateEvaluation,
} from "./state/types.ts";
export {
  type AlgorithmDefinition,
  type AlgorithmDocs,
  type AlgorithmTraits,
  FIELDS_PER_POLICY,
  type LeaseTraits,
  type LuaAlgorithm,
  type LuaFragments,
  NEVER,
  traitsOf,
} from "../algorithms/algorithm.ts";
export { ALGORITHMS, POLICY_KINDS } from "../algorithms/registry.ts";
export { type DenyCachedStore, type DenyCacheOptions, withDenyCache } from "./deny-cache/deny-cache-store.ts";
export { revivePolicy } from "./revive.ts";
export { overrideBlocked } from "./block.ts";
export { leasedLimits } from "../leases/rules.ts";
