/**
 * Floodgate: four rate-limiting algorithms behind one limiter and one store contract, the
 * memory and Redis stores, and `withRateLimit` for fetch handlers. The framework middlewares come
 * from `@floodgate/hono`, `@floodgate/express` and `@floodgate/koa`; what their authors build
 * on, from `@floodgate/core/http`.
 *
 * @module @floodgate/core
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
export type { CallSignal, MaybePromise, PolicySet, RateLimitStore, StoreResult } from "./stores/store.ts";
export {
  resilientStore,
  type CircuitBreakerOptions,
  type ResilientStore,
  type ResilientStoreOptions,
  type ResilientStoreStats,
  type StoreLogger,
} from "./stores/resilient-store.ts";
export { memoryStore, type MemoryStore, type MemoryStoreOptions } from "./stores/memory-store.ts";
export { evaluateState, type EvaluateMode, type KeyState, type StateEvaluation } from "./stores/state.ts";
export { upstashStore, type UpstashRedisLike, type UpstashStoreOptions } from "./stores/redis/upstash-store.ts";
export { redisStore, type IORedisLike, type NodeRedisLike, type RedisStoreOptions } from "./stores/redis/redis-store.ts";
export type { RedisScriptStore, ScriptStoreOptions } from "./stores/redis/script-store.ts";
export {
  createRateLimiter,
  type Charge,
  type Decision,
  type LimitOptions,
  type PolicyDecision,
  type RateLimiter,
  type RateLimiterOptions,
  type RefundOptions,
} from "./limiter.ts";
export { withRateLimit, type FetchHandler, type WithRateLimitOptions } from "./http/fetch.ts";
// The options every middleware and withRateLimit take, and what their callbacks receive.
export type {
  CostFunction,
  HandlerResponse,
  HttpRateLimitOptions,
  KeyFunction,
  LimitedResponse,
  RateLimitRequest,
  Rule,
  RuleOptions,
} from "./http/options.ts";
export type { RateLimitInfo } from "./http/result.ts";
export type { DecisionSource, StoreErrorAction } from "./http/store-guard.ts";
export { HEADER_NAMES, type HeaderFormat } from "./http/headers.ts";
export type { ProxyHeader, TrustProxy, TrustProxyPreset, TrustProxyPresetOptions } from "./http/client-ip.ts";
export { TRUST_PROXY_RANGES, TRUST_PROXY_RANGES_AS_OF } from "./http/proxy-ranges.ts";
export type { Logger, WarningCode, WarningsOption } from "./http/warnings.ts";
