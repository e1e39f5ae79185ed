export {
  createHttpRateLimiter,
  RateLimitResult,
  type DeniedResponse,
  type HttpRateLimiter,
  type HttpRateLimitOptions,
  type KeyFunction,
  type CostFunction,
  type LimitedResponse,
  type RateLimitInfo,
  type RateLimitRequest,
  type RequestAccess,
  type Rule,
  type RuleOptions,
} from "./rate-limit.ts";
export { withRateLimit, toFetchResponse, type FetchHandler, type WithRateLimitOptions } from "./fetch.ts";
export { settleOnClose, type NodeResponseLike } from "./node-response.ts";
export { HEADER_NAMES, DEFAULT_HEADER_FORMATS, type HeaderFormat } from "./headers.ts";
export { TRUST_PROXY_PRESETS, parseForwarded, type TrustProxy, type TrustProxyPreset, type TrustProxyPresetOptions, type ProxyHeader } from "./client-ip.ts";
export { TRUST_PROXY_RANGES, TRUST_PROXY_RANGES_AS_OF } from "./proxy-ranges.ts";
export { parseIp, formatIp, normalizeIp, groupIp, parseRange, inRange, type ParsedIp, type IpRange } from "./ip.ts";
export { compilePattern, compareSpecificity, matchesPattern, normalizePath, targetPath, type RoutePattern } from "./rules.ts";
export type { StoreErrorAction, CircuitBreakerOptions } from "./store-guard.ts";
export { WARNINGS, Warnings, type Logger, type WarningCode, type WarningsOption } from "./warnings.ts";
