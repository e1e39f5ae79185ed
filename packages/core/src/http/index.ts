/**
 * For authors of framework adapters: the framework-neutral HTTP rate limiter that Floodgate's
 * Hono, Express and Koa middlewares translate to, and the helpers they share. Applications
 * import `@floodgate/core` and an adapter instead.
 *
 * @module @floodgate/core/http
 */
export { createHttpRateLimiter, type HandleOptions, type HttpRateLimiter, type RateLimitHandle, withHandle } from "./rate-limit.ts";
export type {
  AdapterOptions,
  Cost,
  CostFunction,
  EndedResponse,
  HandlerResponse,
  HttpRateLimitOptions,
  KeyFunction,
  PolicyFunction,
  RateLimitRequest,
  RequestAccess,
  Rule,
  RuleOptions,
  SettledCost,
} from "./options.ts";
export { type RateLimitInfo, RateLimitResult } from "./result.ts";
export type { DecisionOutcome, PolicyWarning, SkipReason } from "./info.ts";
export type { RolloutOptions } from "./rollout-options.ts";
export { type PreparedResponse, type RateLimitError, rateLimitError } from "./response.ts";
export type { CircuitBreakerOptions, DecisionSource, StoreErrorAction, StoreEvents } from "./store-errors.ts";
export { getRateLimit, settleAfterBody, toFetchResponse, withHeaders } from "./fetch.ts";
export { ipKey, type IpKeyOptions } from "./ip-key.ts";
export { handOffPending } from "./wait-until.ts";
export {
  followDecision,
  HANDLER_THREW,
  leftBeforeDecision,
  type NodeEndable,
  NodeExchange,
  NodeExchangeBase,
  type NodeResponseLike,
  type NodeSocketLike,
  setHeaders,
  setNodeHeaders,
  setNodeResponseHeaders,
  settleOnClose,
} from "./node-response.ts";
export { targetPath } from "./routes.ts";
export { thenOrNow } from "./steps.ts";
export { DEFAULT_HEADER_FORMATS, HEADER_NAMES, type HeaderFormat } from "./headers.ts";
export {
  parseForwarded,
  type ProxyHeader,
  TRUST_PROXY_PRESETS,
  type TrustProxy,
  type TrustProxyPreset,
  type TrustProxyPresetOptions,
} from "./client-ip.ts";
export { TRUST_PROXY_RANGES, TRUST_PROXY_RANGES_AS_OF } from "./proxy-ranges.ts";
export { formatIp, groupIp, inRange, type IpRange, normalizeIp, type ParsedIp, parseIp, parseRange } from "./ip.ts";
export { type Logger, type WarningCode, WARNINGS, Warnings, type WarningsOption } from "./warnings.ts";
export { FloodgateError, type FloodgateErrorCode } from "../errors.ts";
