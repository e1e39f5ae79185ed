/**
 * Floodgate: four rate-limiting algorithms behind one limiter and one store contract, the
 * memory and Redis stores, and `withRateLimit` for fetch handlers. The framework middlewares come
 * from `@floodgate/hono`, `@floodgate/express` and `@floodgate/koa`; what their authors build
 * on, from `@floodgate/core/http`.
 *
 * @module @floodgate/core
 */
export { FloodgateError, type FloodgateErrorCode } from "./errors.ts";
export { type Duration, parseDuration } from "./duration.ts";
export {
  type CalendarSpec,
  calendarWindow,
  type CalendarWindowOptions,
  concurrency,
  type ConcurrencyOptions,
  fixedWindow,
  isPolicy,
  type Policy,
  type PolicyKind,
  slidingLog,
  slidingWindow,
  tokenBucket,
  type TokenBucketOptions,
  type WindowPolicyOptions,
} from "./policies.ts";
export type { MaybePromise, RateLimitStore, StoreSource } from "./stores/store.ts";
// What store authors use lives in @floodgate/core/store; these aliases keep older imports working.
export {
  answeredLocally,
  type CallSignal,
  type EvaluateMode,
  evaluateState,
  type KeyState,
  type LeaseRequest,
  type LeaseReturn,
  type LocalStoreResult,
  type PolicySet,
  type ReservationArgs,
  type StateEvaluation,
  type StoreResult,
} from "./stores/moved.ts";
export {
  type CircuitBreakerOptions,
  type ResilientStore,
  resilientStore,
  type ResilientStoreOptions,
  type ResilientStoreStats,
  type StoreEvents,
  type StoreLogger,
} from "./stores/resilient-store.ts";
export { type MemoryStore, memoryStore, type MemoryStoreOptions } from "./stores/memory-store.ts";
export { type UpstashRedisLike, upstashStore, type UpstashStoreOptions } from "./stores/redis/upstash-store.ts";
export { type IORedisLike, type NodeRedisLike, redisStore, type RedisStoreOptions } from "./stores/redis/redis-store.ts";
export type { RedisScriptStore, ScriptStoreOptions } from "./stores/redis/script-store.ts";
export {
  type Charge,
  createRateLimiter,
  type Decision,
  type LimitOptions,
  type PolicyDecision,
  type RateLimiter,
  type RateLimiterOptions,
  type RefundOptions,
} from "./limiter/index.ts";
export type { Reservation, ReserveOptions, SettleOptions } from "./limiter/index.ts";
export {
  type CompoundCharge,
  type CompoundDecision,
  type CompoundKeys,
  type CompoundLimiter,
  type CompoundLimiterOptions,
  type CompoundReservation,
  createCompoundLimiter,
  type DimensionDecision,
} from "./compound/index.ts";
export { type FetchHandler, getRateLimit, type RateLimitedFetchHandler, withRateLimit, type WithRateLimitOptions } from "./http/fetch.ts";
export { ipKey, type IpKeyOptions } from "./http/ip-key.ts";
export { type DimensionOptions, type DimensionPolicyFunction, dimensions } from "./http/dimensions/dimensions.ts";
export type { RuleDimensions } from "./http/dimensions/contract.ts";
// The options every middleware and withRateLimit take, and what their callbacks receive.
export type {
  Cost,
  CostFunction,
  EndedResponse,
  HandlerResponse,
  HttpRateLimitOptions,
  KeyFunction,
  LimitedResponse,
  PolicyFunction,
  RateLimitRequest,
  Rule,
  RuleOptions,
  SettledCost,
} from "./http/options.ts";
export type { HandleOptions, RateLimitHandle } from "./http/rate-limit.ts";
export type { RateLimitInfo } from "./http/result.ts";
export type { DecisionOutcome, PolicyWarning, SkipReason } from "./http/info.ts";
export type { RolloutOptions } from "./http/rollout-options.ts";
export type { DecisionSource, StoreErrorAction } from "./http/store-errors.ts";
export { HEADER_NAMES, type HeaderFormat } from "./http/headers.ts";
export type { ProxyHeader, TrustProxy, TrustProxyPreset, TrustProxyPresetOptions } from "./http/client-ip.ts";
export { TRUST_PROXY_RANGES, TRUST_PROXY_RANGES_AS_OF } from "./http/proxy-ranges.ts";
export type { Logger, WarningCode, WarningsOption } from "./http/warnings.ts";
