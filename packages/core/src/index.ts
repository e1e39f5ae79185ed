/**
 * @module
 * Floodgate's engine: four rate-limiting algorithms behind one limiter and one store contract.
 */
export { FloodgateError, type FloodgateErrorCode } from "./errors.ts";
export { parseDuration, type Duration } from "./duration.ts";
export {
  fixedWindow,
  isPolicy,
  slidingLog,
  slidingWindow,
  tokenBucket,
  type Policy,
  type PolicyKind,
  type TokenBucketOptions,
  type WindowPolicyOptions,
} from "./policies.ts";
export type { MaybePromise, PolicySet, RateLimitStore, StoreResult } from "./stores/store.ts";
export { memoryStore, type MemoryStore, type MemoryStoreOptions } from "./stores/memory-store.ts";
export { evaluateState, type EvaluateMode, type KeyState, type StateEvaluation } from "./stores/state.ts";
export { upstashStore, type UpstashRedisLike, type UpstashStoreOptions } from "./stores/redis/upstash-store.ts";
export { redisStore, type IORedisLike, type NodeRedisLike, type RedisStoreOptions } from "./stores/redis/redis-store.ts";
export type { RedisScriptStore, ScriptStoreOptions } from "./stores/redis/script-store.ts";
export {
  createRateLimiter,
  type Decision,
  type LimitOptions,
  type PolicyDecision,
  type RateLimiter,
  type RateLimiterOptions,
} from "./limiter.ts";
export * from "./http/index.ts";
