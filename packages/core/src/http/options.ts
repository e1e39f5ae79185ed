import type { FloodgateError } from "../errors.ts";
import { FOREIGN_OPTIONS } from "../foreign-options.ts";
import type { RateLimiter } from "../limiter/index.ts";
import { isPolicies, POLICIES_ACCEPTED, type Policy } from "../policies.ts";
import type { MaybePromise, RateLimitStore } from "../stores/store.ts";
import type { RateLimitRequest } from "./request.ts";
import {
  arrayOf,
  choice,
  CLOCK_ACCEPTED,
  hasMethods,
  invalidOption,
  isBoolean,
  isFunction,
  isRecord,
  isStore,
  isString,
  objectOf,
  oneOf,
  type OptionSpec,
  type OptionSpecs,
  parseOptions,
  prefixOf,
  range,
  recordOf,
  STORE_ACCEPTED,
  whole,
} from "../validation.ts";
import { type ProxyHeader, type TrustProxy, trustProxySpec } from "./client-ip.ts";
import { DEFAULT_HEADER_FORMATS, type HeaderFormat } from "./headers.ts";
import { parseIp, parseRange } from "./ip.ts";
import { checkRuleOptions } from "./rule-options.ts";
import type { RuleDimensions } from "./dimensions/contract.ts";
import { WARN_AT } from "../limiter/warn-at.ts";
import type { RolloutOptions } from "./rollout-options.ts";
import type { RateLimitInfo } from "./info.ts";
import type { CircuitBreakerOptions, StoreEvents } from "../stores/resilient-store.ts";
import type { SkipReason, StoreErrorAction } from "./info.ts";
import { type Logger, WARNINGS, type WarningsOption } from "./warnings.ts";

export type { MaybePromise } from "../stores/store.ts";
export type { RateLimitRequest, RequestAccess } from "./request.ts";

/** Derives a rate-limit key from a request; `undefined` or `""` falls back to the client IP. */
export type KeyFunction<Raw> = (req: RateLimitRequest<Raw>) => MaybePromise<string | undefined>;
/** Units a request costs: a whole number >= 0 (0: not counted). */
export type CostFunction<Raw> = (req: RateLimitRequest<Raw>) => MaybePromise<number>;
/**
 * The policies for a request (a plan, a tier): one policy, several, or `undefined` (this rule
 * does not limit the request). Return policies built once, at startup: each distinct set counts
 * in a namespace of its own.
 */
export type PolicyFunction<Raw> = (req: RateLimitRequest<Raw>) => MaybePromise<Policy | readonly Policy[] | undefined>;

/** A response once it has ended, as a cost's `actual` reads it. */
export interface EndedResponse {
  /** The status sent (the handler's, or 500 when it threw). */
  readonly status: number;
  /** A response header by lower-case name, as sent; `undefined` when absent. */
  header(name: string): string | undefined;
  /** What the handler reported through `report()`, if it did. */
  readonly reported: number | undefined;
}

/**
 * A cost known only after the response (an LLM call's tokens, a query's rows): `estimate` is
 * reserved when the request arrives (all policies or none, like any cost); when the response
 * ends, the actual cost is settled in its place, once. Actual: what `actual` returns for a
 * response sent completely (`undefined`: as below); else (aborted, failed, or no `actual`) what
 * the handler reported through `report()`, else the estimate.
 */
export interface SettledCost<Raw = unknown> {
  /** Units reserved up front: a whole number >= 0, or a function returning one (0: not counted). */
  estimate: number | CostFunction<Raw>;
  /** The units the request used, read when its response has been sent completely. */
  actual?: (req: RateLimitRequest<Raw>, res: EndedResponse) => MaybePromise<number | undefined>;
}

/** What a `cost` option accepts: fixed units, a function of the request, or a cost settled after the response. */
export type Cost<Raw = unknown> = number | CostFunction<Raw> | SettledCost<Raw>;

/** One tier of limits. */
export interface RuleOptions<Raw = unknown> extends RolloutOptions {
  /** One policy or several, all checked atomically; or a function of the request returning them (plans). */
  policy?: Policy | readonly Policy[] | PolicyFunction<Raw>;
  /** A ready limiter instead of `policy` (its prefix is used as is). */
  limiter?: RateLimiter;
  /** Store for this rule (default: the top-level store). */
  store?: RateLimitStore;
  /** This rule's key (default: the top-level `key`, then the client IP). */
  key?: KeyFunction<Raw>;
  /** This rule's cost (default: the top-level `cost`, then 1). */
  cost?: Cost<Raw>;
  /**
   * Instead of `policy` or `limiter`: several keys, each with its own policy, decided together
   * (all or nothing), as `dimensions({ user: { key, policy }, org: { key, policy } })` makes them.
   */
  dimensions?: RuleDimensions;
}

/** A rule: a policy, several policies, or {@link RuleOptions}. */
export type Rule<Raw = unknown> = Policy | readonly Policy[] | RuleOptions<Raw>;

/** What a custom {@link HttpRateLimitOptions.handler} answers a limited request with. */
export interface HandlerResponse {
  /** The status to send; default {@link HttpRateLimitOptions.statusCode} (429). */
  status?: number;
  /** Headers added after the rate-limit headers and Retry-After; a `Content-Type` here replaces the default. */
  headers?: Record<string, string>;
  /** A string is sent as is; anything else as JSON. */
  body?: unknown;
}

/** @deprecated Renamed {@link HandlerResponse}. */
export type LimitedResponse = HandlerResponse;

/** Options shared by every Floodgate middleware (Hono, Express, Koa) and `withRateLimit`. */
export interface HttpRateLimitOptions<Raw = unknown> extends RolloutOptions {
  /** A ready limiter for requests no rule matches. */
  limiter?: RateLimiter;
  /** Store of the limiters built from `policy` and `rules` (default a new `memoryStore()`). */
  store?: RateLimitStore;
  /**
   * Policy (or policies) for requests no rule matches; or a function of the request returning
   * them, or `undefined` for requests it does not limit (limits per plan).
   */
  policy?: Policy | readonly Policy[] | PolicyFunction<Raw>;
  /** Tiers keyed by `"METHOD /path"` (`*`, `:param`), most specific first; `default` for the rest. */
  rules?: Record<string, Rule<Raw>>;
  /** Key namespace (default the limiter's prefix, else `"fg:"`); each rule adds its pattern. */
  prefix?: string;
  /** Epoch-ms clock for the limiters built here and for header deltas (default `Date.now`). */
  clock?: () => number;
  /**
   * `"leased"`: the limiters built here from `policy` and `rules` serve decisions from leases
   * where they can (see `createRateLimiter`'s `mode` and docs/leases.md); default `"exact"`.
   */
  mode?: "exact" | "leased";
  /** Leased mode: look-ahead and longest life of a lease, ms (default 5000). */
  leaseMs?: number;
  /** Default: the client IP (IPv6 grouped by `ipv6Subnet`). */
  key?: KeyFunction<Raw>;
  /**
   * Units a request costs (default 1): a whole number, a function of the request, or
   * `{ estimate, actual }` to reserve an estimate and settle the actual cost after the response.
   */
  cost?: Cost<Raw>;
  /** Requests for which this returns true are neither counted nor given headers. */
  skip?: (req: RateLimitRequest<Raw>) => MaybePromise<boolean>;
  /** IPs, CIDR ranges or keys that are never limited. */
  allowList?: readonly string[];
  /**
   * IPs, CIDR ranges or keys that are refused: answered 403 before anything is counted (an
   * address before `skip`, a key as soon as it is known); `denyList` wins over `allowList`.
   */
  denyList?: readonly string[];
  /** Which proxies to trust for the client IP (default `false`: the socket address). */
  trustProxy?: TrustProxy;
  /** The header a proxy chain is read from (default `"x-forwarded-for"`). */
  proxyHeader?: ProxyHeader;
  /** IPv6 prefix length clients are grouped by (default 64). */
  ipv6Subnet?: number;
  /**
   * Match rule paths case-sensitively. Default: as the framework routes where the adapter knows it
   * (Express: the app's "case sensitive routing"; Koa: its @koa/router routers' `sensitive`), else
   * `false`. `true` over case-insensitive routing is rejected: another case would reach the route uncounted.
   */
  caseSensitive?: boolean;
  /** Header formats (default `["legacy", "draft-11"]`; `false` for none). */
  headers?: boolean | HeaderFormat | readonly HeaderFormat[];
  /** `X-RateLimit-Reset` as epoch seconds (default) or seconds from now. */
  legacyReset?: "epoch" | "delta";
  /** Status of a limited response (default 429). */
  statusCode?: number;
  /** The message in the default body, or a whole JSON body. */
  message?: string | Record<string, unknown>;
  /** `"json"` (default) or `"problem+json"` (RFC 9457). */
  format?: "json" | "problem+json";
  /** Builds the limited response instead of the default. */
  handler?: (req: RateLimitRequest<Raw>, info: RateLimitInfo) => MaybePromise<HandlerResponse>;
  /** Refund requests that end successfully (see `requestWasSuccessful`: by default a status below 400). */
  skipSuccessfulRequests?: boolean;
  /** Refund requests that end unsuccessfully (by default a status of 400 or more), or whose client disconnects early. */
  skipFailedRequests?: boolean;
  /**
   * What counts as successful for `skipSuccessfulRequests` and `skipFailedRequests`: called once
   * the response is sent, with its status (default `status < 400`). A client that disconnected
   * early is never successful. A function that throws counts the request as failed.
   */
  requestWasSuccessful?: (req: RateLimitRequest<Raw>, status: number) => boolean;
  /**
   * When the store fails or times out: `"fallback"` (default: a local in-memory limiter with the
   * same policies), `"allow"` or `"deny"`; or a hook returning one of those (void: `"fallback"`).
   */
  onStoreError?: StoreErrorAction | ((error: FloodgateError, req: RateLimitRequest<Raw> | undefined) => StoreErrorAction | void);
  /**
   * Abandon a store call after this many ms (default 1,000 for remote stores; the memory store
   * answers synchronously and is never timed); `false` for no deadline.
   */
  timeoutMs?: number | false;
  /**
   * Stop calling a failing store for a cool-down, then probe it with one call (default
   * `{ failures: 5, cooldownMs: 1000 }`: a probe a second, so decisions are back on the store
   * within about a second of its return); `maxCooldownMs` backs off by doubling; `false` to disable.
   */
  circuitBreaker?: false | CircuitBreakerOptions;
  /**
   * Told of the remote stores' failures, circuit openings and recoveries, and late charges given
   * back, as they happen (for metrics; see `StoreEvents`). Stores the app wrapped in
   * `resilientStore()` itself report through that wrapper's own `events`.
   */
  storeEvents?: StoreEvents;
  /** Called with every decision; a promise it returns joins `info.pending`. */
  onDecision?: (info: RateLimitInfo, req: RateLimitRequest<Raw>) => void | Promise<unknown>;
  /** Called with every denial; a promise it returns joins `info.pending`. */
  onLimited?: (info: RateLimitInfo, req: RateLimitRequest<Raw>) => void | Promise<unknown>;
  /**
   * Called for a request that is not counted at all, with why: `"skip"` returned true, the
   * `allowList` has it, no rule (or `policy` function) limits it, or its cost was 0.
   */
  onSkipped?: (req: RateLimitRequest<Raw>, reason: SkipReason) => void;
  /** Where warnings go (default `console`). */
  logger?: Logger;
  /** Misconfiguration warnings: all (default), none, or by code. */
  warnings?: WarningsOption;
}

/** The name every HTTP option error starts with: the middlewares and `withRateLimit` share the options. */
export const WHERE = "rateLimit()";

export const FORMATS: readonly HeaderFormat[] = ["legacy", "draft-6", "draft-7", "draft-11"];
export const RULE_ACCEPTED =
  "a policy, an array of policies, or an object { policy | limiter, store?, key?, cost?, shadow?, enforce? (0 to 1), shadowHeaders?, shadowPolicy?, warnAt? (0 to 1, or by policy name) }";
const POLICY_ACCEPTED = `${POLICIES_ACCEPTED}, or a function of the request returning one of those or undefined`;

const quoted = (values: readonly string[]): string => values.map((v) => `"${v}"`).join(", ");
const FUNCTION: OptionSpec = [isFunction, "a function"];
let optionSpecs: OptionSpecs | undefined;

/** Every option: its test (run through zod, see validation.ts) and what it accepts in words. Built on first use. */
function specs(): OptionSpecs {
  if (optionSpecs !== undefined) return optionSpecs;
  const isLimiter = (v: unknown): boolean => hasMethods("limit")(v) === true && Array.isArray((v as RateLimiter).policies);
  const isUnits = (v: unknown): boolean => isFunction(v) === true || whole(0)(v) === true;
  const isSettled = objectOf({ estimate: isUnits, actual: isFunction });
  const isCost = (v: unknown): boolean => isUnits(v) || (isSettled(v) === true && (v as SettledCost).estimate !== undefined);
  const isPolicyOption = (v: unknown): boolean => isPolicies(v) === true || isFunction(v) === true;
  const isFractionOf1 = (v: unknown): boolean => typeof v === "number" && v >= 0 && v <= 1;
  const isRule = objectOf({
    policy: isPolicyOption,
    limiter: isLimiter,
    store: isStore,
    key: isFunction,
    cost: isCost,
    shadow: isBoolean,
    enforce: isFractionOf1,
    shadowHeaders: isBoolean,
    shadowPolicy: isPolicies,
    warnAt: WARN_AT[0],
    dimensions: isFunction,
  });
  const isFormat = oneOf(FORMATS);
  const isBreaker = objectOf({ failures: whole(1), cooldownMs: whole(1), maxCooldownMs: whole(1) });
  const bool: OptionSpec = [isBoolean, "a boolean"];
  // An address with a bad prefix length ("10.0.0.0/33", "10.0.0.0/8x") is a mistake, not a key that never matches.
  const ADDRESS_LIST: OptionSpec = [
    arrayOf((v) =>
      isString(v) && v !== "" && (parseRange(v as string) !== undefined || parseIp((v as string).split("/")[0]!) === undefined)
    ),
    "an array of IP addresses, CIDR ranges or keys (an address with a prefix length must be a valid CIDR range, such as 10.0.0.0/8)",
  ];
  return optionSpecs = {
    limiter: [isLimiter, "a limiter from createRateLimiter()"],
    store: [isStore, STORE_ACCEPTED],
    policy: [isPolicyOption, POLICY_ACCEPTED],
    rules: [
      recordOf((rule) => isPolicies(rule) || isRule(rule)),
      `an object mapping "METHOD /path" patterns (or "default") to ${RULE_ACCEPTED}`,
    ],
    prefix: prefixOf(64),
    clock: [isFunction, CLOCK_ACCEPTED],
    mode: [/* @__PURE__ */ oneOf(["exact", "leased"]), '"exact" (default) or "leased"'],
    leaseMs: [/* @__PURE__ */ whole(100, 3_600_000), "a whole number of ms from 100 to 3600000 (default 5000)"],
    key: FUNCTION,
    cost: [
      isCost,
      "a whole number >= 0, a function returning one, or { estimate: number | function, actual?: (req, res) => number }",
    ],
    skip: FUNCTION,
    allowList: ADDRESS_LIST,
    denyList: ADDRESS_LIST,
    trustProxy: trustProxySpec(),
    proxyHeader: choice("x-forwarded-for", "forwarded"),
    ipv6Subnet: range("a prefix length", 1, 128),
    caseSensitive: bool,
    headers: [(v) => isBoolean(v) || isFormat(v) || arrayOf(isFormat)(v), `true, false, or one or several of ${quoted(FORMATS)}`],
    legacyReset: choice("epoch", "delta"),
    statusCode: range("an HTTP status", 400, 599),
    message: [
      (v) => isString(v) || isRecord(v),
      "a string (the message in the default body), or a plain object sent as the whole JSON body",
    ],
    format: choice("json", "problem+json"),
    handler: FUNCTION,
    skipSuccessfulRequests: bool,
    skipFailedRequests: bool,
    requestWasSuccessful: FUNCTION,
    onStoreError: [
      (v) => isFunction(v) || v === "allow" || v === "deny" || v === "fallback",
      '"allow", "deny", "fallback", or a function returning one of them',
    ],
    timeoutMs: [(v) => v === false || whole(1, 60_000)(v), "a whole number of milliseconds from 1 to 60000, or false (no deadline)"],
    circuitBreaker: [
      (v) => v === false || isBreaker(v),
      "false or { failures?: whole number >= 1, cooldownMs?: whole number >= 1, maxCooldownMs?: whole number >= 1 }",
    ],
    storeEvents: [
      (v) => isRecord(v) && Object.values(v as object).every((f) => f === undefined || isFunction(f) === true),
      "an object of optional functions { failure, circuitOpened, circuitClosed, lateCharge }",
    ],
    onDecision: FUNCTION,
    onLimited: FUNCTION,
    onSkipped: FUNCTION,
    shadow: bool,
    enforce: [isFractionOf1, "a fraction of clients from 0 to 1 (0.01: 1%; default 1, every client)"],
    shadowHeaders: bool,
    shadowPolicy: [isPolicies, `${POLICIES_ACCEPTED}, named apart from \`policy\`'s`],
    warnAt: WARN_AT,
    logger: [hasMethods("warn"), "an object with a warn(message) method, such as console"],
    warnings: [
      (v) => isBoolean(v) || recordOf((on, code) => Object.hasOwn(WARNINGS, code) && isBoolean(on))(v),
      `a boolean, or an object mapping warning codes (${Object.keys(WARNINGS).join(", ")}) to booleans`,
    ],
  };
}

/** The error of one invalid HTTP option. */
export const invalidHttpOption = (option: string, value: unknown, expected: string): FloodgateError =>
  invalidOption(WHERE, option, value, expected);

/**
 * An adapter's own options, checked with the shared ones: a name of a function-valued option
 * (Hono's `getConnInfo`), or names mapped to what each takes (Koa's `{ throw: "boolean" }`).
 */
export type AdapterOptions = string | Readonly<Record<string, "function" | "boolean">>;

/** Validates `options` once, at construction, and returns the options given, with the adapter's own (see {@link AdapterOptions}). */
export function parseHttpOptions<Raw>(
  options: HttpRateLimitOptions<Raw>,
  adapterOptions: AdapterOptions | undefined,
): HttpRateLimitOptions<Raw> {
  let all = specs();
  if (adapterOptions !== undefined) {
    const own = typeof adapterOptions === "string" ? { [adapterOptions]: "function" as const } : adapterOptions;
    const withOwn: Record<string, OptionSpec> = { ...all };
    for (const name in own) withOwn[name] = own[name] === "function" ? FUNCTION : [isBoolean, "a boolean"];
    all = withOwn;
  }
  checkRuleOptions((options as { rules?: unknown } | undefined)?.rules, WHERE);
  const o = parseOptions<HttpRateLimitOptions<Raw>>(options, WHERE, all, FOREIGN_OPTIONS);
  if (o.limiter !== undefined && o.shadowPolicy !== undefined) {
    throw invalidHttpOption(
      "shadowPolicy",
      o.shadowPolicy,
      "`policy` beside it, not a ready `limiter` (create the limiter with its own `shadowPolicy`)",
    );
  }
  if (o.limiter !== undefined && (o.policy !== undefined || o.store !== undefined)) {
    throw invalidHttpOption(
      "limiter",
      o.limiter,
      "either `limiter`, or `store` and `policy`, not both (a ready limiter has its own store and policies)",
    );
  }
  return o;
}

/** The header formats the options ask for; at most one draft format, since each writes RateLimit-Policy. */
export function headerFormats(headers: HttpRateLimitOptions["headers"]): readonly HeaderFormat[] {
  const formats = headers === undefined || headers === true
    ? DEFAULT_HEADER_FORMATS
    : headers === false
    ? []
    : typeof headers === "string"
    ? [headers]
    : [...new Set(headers)];
  const drafts = formats.filter((f) => f !== "legacy");
  if (drafts.length > 1) {
    throw invalidHttpOption(
      "headers",
      headers,
      `at most one of "draft-6", "draft-7", "draft-11" ("${drafts[0]}" and "${drafts[1]}" both write RateLimit-Policy)`,
    );
  }
  return formats;
}
