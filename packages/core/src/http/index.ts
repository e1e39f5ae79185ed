/**
 * For authors of framework adapters: the framework-neutral HTTP rate limiter that Floodgate's
 * Hono, Express and Koa middlewares translate to, and the helpers they share. Applications
 * import `@floodgate/core` and an adapter instead.
 *
 * @module @floodgate/core/http
 */
export { createHttpRateLimiter, type HttpRateLimiter } from "./rate-limit.ts";
export type {
  CostFunction,
  HandlerResponse,
  HttpRateLimitOptions,
  KeyFunction,
  RateLimitRequest,
  RequestAccess,
  Rule,
  RuleOptions,
} from "./options.ts";
export { RateLimitResult, type RateLimitInfo } from "./result.ts";
export type { PreparedResponse } from "./response.ts";
export type { CircuitBreakerOptions, DecisionSource, StoreErrorAction } from "./store-guard.ts";
export { toFetchResponse } from "./fetch.ts";
export { settleOnClose, type NodeResponseLike } from "./node-response.ts";
export { targetPath } from "./rules.ts";
export { DEFAULT_HEADER_FORMATS, HEADER_NAMES, type HeaderFormat } from "./headers.ts";
export { parseForwarded, TRUST_PROXY_PRESETS, type ProxyHeader, type TrustProxy, type TrustProxyPreset, type TrustProxyPresetOptions } from "./client-ip.ts";
export { TRUST_PROXY_RANGES, TRUST_PROXY_RANGES_AS_OF } from "./proxy-ranges.ts";
export { formatIp, groupIp, inRange, normalizeIp, parseIp, parseRange, type IpRange, type ParsedIp } from "./ip.ts";
export { WARNINGS, Warnings, type Logger, type WarningCode, type WarningsOption } from "./warnings.ts";
