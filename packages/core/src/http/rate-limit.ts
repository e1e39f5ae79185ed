import { describeValue, FloodgateError } from "../errors.ts";
import { createRateLimiter, type Decision, type PolicyDecision, type RateLimiter } from "../limiter.ts";
import { memoryStore } from "../stores/memory-store.ts";
import { isPolicies, isPolicy, POLICIES_ACCEPTED, type Policy } from "../policies.ts";
import type { RateLimitStore } from "../stores/store.ts";
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
  parseOptions,
  prefixOf,
  range,
  recordOf,
  STORE_ACCEPTED,
  whole,
  type Check,
  type OptionSpec,
  type OptionSpecs,
} from "../validation.ts";
import { createClientIpResolver, TRUST_PROXY_PRESETS, type ProxyHeader, type TrustProxy } from "./client-ip.ts";
import {
  createHeaderWriter,
  DEFAULT_HEADER_FORMATS,
  RETRY_AFTER,
  retryAfterSeconds,
  type HeaderFormat,
  type HeaderWriter,
} from "./headers.ts";
import { formatIp, groupIp, inRange, parseIp, parseRange, type IpRange, type ParsedIp } from "./ip.ts";
import { compareSpecificity, compilePattern, matchesPattern, normalizePath, type RoutePattern } from "./rules.ts";
import { CircuitBreaker, errorText, toStoreError, withTimeout, type CircuitBreakerOptions, type StoreErrorAction } from "./store-guard.ts";
import { Warnings, WARNINGS, type Logger, type WarningsOption } from "./warnings.ts";

type MaybePromise<T> = T | Promise<T>;

/** The request as Floodgate's callbacks see it, whatever the framework. */
export interface RateLimitRequest<Raw = unknown> {
  /** Upper-case method. */
  readonly method: string;
  /** The full path (not mount-relative), without the query string or fragment. */
  readonly path: string;
  /** The client address after trusted-proxy resolution, canonical; `undefined` when unknown. */
  readonly ip: string | undefined;
  /** A request header by lower-case name; repeated headers joined with `", "`. */
  header(name: string): string | undefined;
  /** The framework's own request object (Hono `Context`, Express `req`, Koa `ctx`, fetch `Request`). */
  readonly raw: Raw;
}

/** How an adapter reads its framework's request: given once, at construction. */
export interface RequestAccess<Raw> {
  method(raw: Raw): string;
  /**
   * The full path (not mount-relative) as the framework routes it; a query string, if included,
   * is ignored. From a raw request-target (Node's `req.url`), use {@link targetPath}.
   */
  path(raw: Raw): string;
  header(raw: Raw, name: string): string | undefined;
}

/** Derives a rate-limit key from a request; `undefined` or `""` falls back to the client IP. */
export type KeyFunction<Raw> = (req: RateLimitRequest<Raw>) => MaybePromise<string | undefined>;
/** Units a request costs: a whole number >= 0 (0: not counted). */
export type CostFunction<Raw> = (req: RateLimitRequest<Raw>) => MaybePromise<number>;

/** One tier of limits. */
export interface RuleOptions<Raw = unknown> {
  /** One policy or several, all checked atomically. */
  policy?: Policy | readonly Policy[];
  /** A ready limiter instead of `policy` (its prefix is used as is). */
  limiter?: RateLimiter;
  /** Store for this rule (default: the top-level store). */
  store?: RateLimitStore;
  /** This rule's key (default: the top-level `key`, then the client IP). */
  key?: KeyFunction<Raw>;
  /** This rule's cost (default: the top-level `cost`, then 1). */
  cost?: number | CostFunction<Raw>;
}

/** A rule: a policy, several policies, or {@link RuleOptions}. */
export type Rule<Raw = unknown> = Policy | readonly Policy[] | RuleOptions<Raw>;

/** A custom 429 (or other) response from {@link HttpRateLimitOptions.handler}. */
export interface LimitedResponse {
  status?: number;
  headers?: Record<string, string>;
  /** A string is sent as is; anything else as JSON. */
  body?: unknown;
}

/**
 * What Floodgate decided for one request, exposed to hooks and as `c.get("rateLimit")` etc.: the
 * limiter's figures (a `limit` of 0 when no limiter decided: the store-error policy did) and where
 * they came from.
 */
export interface RateLimitInfo extends Decision {
  /** The key counted (with the rule's own namespace in the store). */
  readonly key: string;
  /** The matched rule's pattern, or `"default"`. */
  readonly rule: string;
  readonly cost: number;
  /** Where the decision came from: the store, the local fallback limiter, or the store-error policy. */
  readonly source: "store" | "fallback" | "allow" | "deny";
  /** The store failure behind a `fallback`, `allow` or `deny` decision. */
  readonly storeError: FloodgateError | undefined;
  /** The limiter's decision (`undefined` for `allow`/`deny` after a store failure). */
  readonly decision: Decision | undefined;
}

/** A denied request's response, ready for an adapter to send. */
export interface DeniedResponse {
  readonly status: number;
  /** Flat `[name, value, ...]` pairs, rate-limit headers and Content-Type included. */
  readonly headers: readonly string[];
  readonly body: string | null;
}

/** Options shared by every Floodgate middleware (Hono, Express, Koa) and `withRateLimit`. */
export interface HttpRateLimitOptions<Raw = unknown> {
  /** A ready limiter for requests no rule matches. */
  limiter?: RateLimiter;
  /** Store of the limiters built from `policy` and `rules` (default a new `memoryStore()`). */
  store?: RateLimitStore;
  /** Policy (or policies) for requests no rule matches. */
  policy?: Policy | readonly Policy[];
  /** Tiers keyed by `"METHOD /path"` (`*`, `:param`), most specific first; `default` for the rest. */
  rules?: Record<string, Rule<Raw>>;
  /** Key namespace (default the limiter's prefix, else `"fg:"`); each rule adds its pattern. */
  prefix?: string;
  /** Epoch-ms clock for the limiters built here and for header deltas (default `Date.now`). */
  clock?: () => number;
  /** Default: the client IP (IPv6 grouped by `ipv6Subnet`). */
  key?: KeyFunction<Raw>;
  /** Default 1. */
  cost?: number | CostFunction<Raw>;
  /** Requests for which this returns true are neither counted nor given headers. */
  skip?: (req: RateLimitRequest<Raw>) => MaybePromise<boolean>;
  /** IPs, CIDR ranges or keys that are never limited. */
  allowList?: readonly string[];
  /** Which proxies to trust for the client IP (default `false`: the socket address). */
  trustProxy?: TrustProxy;
  /** The header a proxy chain is read from (default `"x-forwarded-for"`). */
  proxyHeader?: ProxyHeader;
  /** IPv6 prefix length clients are grouped by (default 64). */
  ipv6Subnet?: number;
  /** Match rule paths case-sensitively (default `false`). */
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
  handler?: (req: RateLimitRequest<Raw>, info: RateLimitInfo) => MaybePromise<LimitedResponse>;
  /** Refund requests that end with a status below 400. */
  skipSuccessfulRequests?: boolean;
  /** Refund requests that end with a status of 400 or more, or whose client disconnects early. */
  skipFailedRequests?: boolean;
  /**
   * When the store fails or times out: `"fallback"` (default: a local in-memory limiter with the
   * same policies), `"allow"` or `"deny"`; or a hook returning one of those (void: `"fallback"`).
   */
  onStoreError?: StoreErrorAction | ((error: FloodgateError, req: RateLimitRequest<Raw> | undefined) => StoreErrorAction | void);
  /** Abandon a store call after this many ms (default: no deadline). */
  timeoutMs?: number;
  /** Stop calling a failing store for a cool-down (default `{ failures: 5, cooldownMs: 30000 }`). */
  circuitBreaker?: false | CircuitBreakerOptions;
  /** Called with every decision. */
  onDecision?: (info: RateLimitInfo, req: RateLimitRequest<Raw>) => void;
  /** Called with every denial. */
  onLimited?: (info: RateLimitInfo, req: RateLimitRequest<Raw>) => void;
  /** Where warnings go (default `console`). */
  logger?: Logger;
  /** Misconfiguration warnings: all (default), none, or by code. */
  warnings?: WarningsOption;
}

const FORMATS: readonly HeaderFormat[] = ["legacy", "draft-6", "draft-7", "draft-11"];
const ACTIONS: readonly StoreErrorAction[] = ["allow", "deny", "fallback"];
const JSON_TYPE = "application/json; charset=utf-8";
const quoted = (values: readonly string[]): string => values.map((v) => `"${v}"`).join(", ");
let optionSpecs: OptionSpecs | undefined;
const FUNCTION: OptionSpec = [isFunction, "a function"];

/** Every option: its check (run through zod, see validation.ts) and what it accepts in words. Built on first use. */
function specs(): OptionSpecs {
  if (optionSpecs !== undefined) return optionSpecs;
  const presets = Object.keys(TRUST_PROXY_PRESETS);
  const isLimiter: Check = (v) => hasMethods("limit")(v) && Array.isArray((v as RateLimiter).policies);
  const isCost: Check = (v) => isFunction(v) || whole(0)(v);
  const isRule = objectOf({ policy: isPolicies, limiter: isLimiter, store: isStore, key: isFunction, cost: isCost });
  const isFormat = oneOf(FORMATS);
  const isBreaker = objectOf({ failures: whole(1), cooldownMs: whole(1) });
  const bool: OptionSpec = [isBoolean, "a boolean"];
  return optionSpecs = {
    limiter: [isLimiter, "a limiter from createRateLimiter()"],
    store: [isStore, STORE_ACCEPTED],
    policy: [isPolicies, POLICIES_ACCEPTED],
    rules: [
      recordOf((rule) => isPolicies(rule) || isRule(rule)),
      'an object mapping "METHOD /path" patterns (or "default") to a policy, an array of policies, or { policy | limiter, store?, key?, cost? }',
    ],
    prefix: prefixOf(64),
    clock: [isFunction, CLOCK_ACCEPTED],
    key: FUNCTION,
    cost: [isCost, "a whole number >= 0 or a function returning one"],
    skip: FUNCTION,
    // An address with a bad prefix length ("10.0.0.0/33", "10.0.0.0/8x") is a mistake, not a key that never matches.
    allowList: [arrayOf((v) => isString(v) && v !== "" && (parseRange(v as string) !== undefined || parseIp((v as string).split("/")[0]!) === undefined)), "an array of IP addresses, CIDR ranges or keys"],
    trustProxy: [
      (v) => isBoolean(v) || whole(0, 64)(v) || presets.includes(v as string) || arrayOf((r) => isString(r) && parseRange(r as string) !== undefined)(v),
      `false, true, a hop count (0-64), an array of proxy IPs/CIDR ranges, or a preset: ${quoted(presets)}`,
    ],
    proxyHeader: choice("x-forwarded-for", "forwarded"),
    ipv6Subnet: range("a prefix length", 1, 128),
    caseSensitive: bool,
    headers: [(v) => isBoolean(v) || isFormat(v) || arrayOf(isFormat)(v), `true, false, or one or several of ${quoted(FORMATS)}`],
    legacyReset: choice("epoch", "delta"),
    statusCode: range("an HTTP status", 400, 599),
    message: [(v) => isString(v) || isRecord(v), "a string, or an object sent as the JSON body"],
    format: choice("json", "problem+json"),
    handler: FUNCTION,
    skipSuccessfulRequests: bool,
    skipFailedRequests: bool,
    onStoreError: [
      (v) => isFunction(v) || ACTIONS.includes(v as StoreErrorAction),
      '"allow", "deny", "fallback", or a function returning one of them',
    ],
    timeoutMs: range("a whole number of milliseconds", 1, 60_000),
    circuitBreaker: [(v) => v === false || isBreaker(v), "false or { failures?: whole number >= 1, cooldownMs?: whole number >= 1 }"],
    onDecision: FUNCTION,
    onLimited: FUNCTION,
    logger: [hasMethods("warn"), "an object with a warn(message) method, such as console"],
    warnings: [
      (v) => isBoolean(v) || recordOf((on, code) => Object.hasOwn(WARNINGS, code) && isBoolean(on))(v),
      `a boolean, or an object mapping warning codes (${Object.keys(WARNINGS).join(", ")}) to booleans`,
    ],
  };
}

/** One compiled rule: its limiter(s), key, cost and precomputed headers. */
interface CompiledRule<Raw> {
  readonly name: string;
  readonly pattern: RoutePattern | undefined;
  readonly limiter: RateLimiter;
  readonly policies: readonly Policy[];
  readonly key: KeyFunction<Raw> | undefined;
  readonly cost: number | CostFunction<Raw>;
  readonly writeHeaders: HeaderWriter | undefined;
  readonly breaker: CircuitBreaker | undefined;
  fallback: RateLimiter | undefined;
  /** Requests already counted, for the double-count warning. */
  readonly seen: WeakSet<object>;
  watched: number;
}

/** The core of every Floodgate middleware; adapters translate to and from it. */
export interface HttpRateLimiter<Raw> {
  /**
   * Decides for one request. `undefined` means not limited at all (skipped, allow-listed, or no
   * rule applies): continue without headers. Never rejects because of the store.
   * @param socketIp - the connection's peer address (or, when `ipResolved`, the client address itself)
   * @param ipResolved - the address was already resolved through trusted proxies (e.g. Express's `req.ip`)
   */
  check(raw: Raw, socketIp: string | undefined, ipResolved?: boolean): Promise<RateLimitResult | undefined>;
}

const storeRegistry = new WeakMap<RateLimitStore, Map<string, WeakSet<object>>>();
let requestsServed = false;
let createdWhileServing = 0;
const PER_REQUEST_THRESHOLD = 20;
const DOUBLE_COUNT_WATCH = 1000;
/**
 * Requests checked for forwarding headers that an untrusted proxy setting ignores. A
 * misconfiguration shows on the first requests; checking every request would read two headers
 * each time (which materialises the whole header list on some servers, e.g. @hono/node-server).
 */
const FORWARDED_WATCH = 1000;

/** The result of {@link HttpRateLimiter.check}. */
export class RateLimitResult implements RateLimitInfo {
  // `declare`: assigned once in the constructor, not first defined as undefined (one store each).
  declare readonly decision: Decision | undefined;
  declare readonly key: string;
  declare readonly rule: string;
  declare readonly cost: number;
  declare readonly source: RateLimitInfo["source"];
  declare readonly storeError: FloodgateError | undefined;
  declare readonly allowed: boolean;
  /** The decision's figures; 0 (and `policy` "") when no store answered (`source` "allow"/"deny"). */
  declare readonly limit: number;
  declare readonly remaining: number;
  declare readonly resetAt: number;
  declare readonly retryAfterMs: number;
  declare readonly policy: string;
  /** Rate-limit headers as flat `[name, value, ...]` pairs, to set on the response. */
  declare readonly headers: string[];
  /** The response to send when not allowed. */
  declare response: DeniedResponse | undefined;
  #refund: ((status: number) => void) | undefined;

  constructor(
    decision: Decision | undefined,
    key: string,
    rule: string,
    cost: number,
    source: RateLimitInfo["source"],
    storeError: FloodgateError | undefined,
    allowed: boolean,
    headers: string[],
    refund: ((status: number) => void) | undefined,
  ) {
    this.decision = decision;
    this.key = key;
    this.rule = rule;
    this.cost = cost;
    this.source = source;
    this.storeError = storeError;
    this.allowed = allowed;
    this.limit = decision?.limit ?? 0;
    this.remaining = decision?.remaining ?? 0;
    this.resetAt = decision?.resetAt ?? 0;
    this.retryAfterMs = decision?.retryAfterMs ?? 0;
    this.policy = decision?.policy ?? "";
    this.headers = headers;
    this.response = undefined;
    this.#refund = refund;
  }

  /** The decision's policies, or none when no store answered. */
  get policies(): readonly PolicyDecision[] {
    return this.decision?.policies ?? [];
  }

  /** True when the adapter should report the final status through {@link settle}. */
  get settles(): boolean {
    return this.#refund !== undefined;
  }

  /**
   * Reports how the request ended: its status, or 0 when the client disconnected before the
   * response finished. Refunds (once) when `skipSuccessfulRequests`/`skipFailedRequests` say so.
   */
  settle(status: number): void {
    const refund = this.#refund;
    if (refund === undefined) return;
    this.#refund = undefined;
    refund(status);
  }

  /** The figures, key, rule, cost and source (not the decision object, store error, headers or response). */
  toJSON(): object {
    const { decision: _d, storeError: _e, headers: _h, response: _r, ...plain } = this;
    return { ...plain, policies: this.policies };
  }
}

class RequestView<Raw> implements RateLimitRequest<Raw> {
  declare readonly raw: Raw;
  declare readonly method: string;
  declare readonly path: string;
  declare readonly ip: string | undefined;
  declare readonly access: RequestAccess<Raw>;

  constructor(raw: Raw, method: string, path: string, ip: string | undefined, access: RequestAccess<Raw>) {
    this.raw = raw;
    this.method = method;
    this.path = path;
    this.ip = ip;
    this.access = access;
  }

  header(name: string): string | undefined {
    return this.access.header(this.raw, name);
  }
}

const isThenable = <T>(v: MaybePromise<T>): v is Promise<T> => typeof (v as Promise<T>)?.then === "function";

/**
 * Keys longer than the limiter accepts are shortened with a hash of the whole, so they stay
 * distinct. What a key function returns unchecked (`null`, a number) goes on as is: the limiter
 * rejects it (INVALID_ARGUMENT naming the key), not a TypeError here.
 */
function fitKey(key: string): string {
  if (typeof key !== "string" || key.length <= 1000) return key;
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  return `${key.slice(0, 980)}#${(h >>> 0).toString(36)}`;
}

/**
 * Builds the framework-neutral HTTP rate limiter that every adapter calls: validates `options`
 * once, compiles rules, header writers and the client-IP resolver, then answers `check()` per
 * request. Adapters give `access`, how to read their request.
 *
 * @example
 * const http = createHttpRateLimiter({ policy: slidingWindow({ limit: 100, window: "1m" }) }, {
 *   method: (r: Request) => r.method, path: (r) => new URL(r.url).pathname, header: (r, n) => r.headers.get(n) ?? undefined,
 * });
 * const result = await http.check(request, "203.0.113.7");
 * @param adapterFunction - the name of an adapter's own function-valued option (Hono's
 *   `getConnInfo`), validated here with the others; the adapter reads it from `options`.
 */
export function createHttpRateLimiter<Raw>(options: HttpRateLimitOptions<Raw>, access: RequestAccess<Raw>, adapterFunction?: string): HttpRateLimiter<Raw> {
  const where = "rateLimit()";
  const o = parseOptions<HttpRateLimitOptions<Raw>>(options, where, adapterFunction ? { ...specs(), [adapterFunction]: FUNCTION } : specs());
  const invalid = (option: string, value: unknown, expected: string): FloodgateError => invalidOption(where, option, value, expected);
  if (o.limiter !== undefined && (o.policy !== undefined || o.store !== undefined)) {
    throw invalid("limiter", o.limiter, "either `limiter`, or `store` and `policy`, not both");
  }
  const warnings = new Warnings(o.warnings, o.logger ?? console);
  const clock = o.clock ?? Date.now;
  const caseSensitive = o.caseSensitive ?? false;
  const ipv6Subnet = o.ipv6Subnet ?? 64;
  const trustProxy = o.trustProxy ?? false;
  const resolveIp = createClientIpResolver(trustProxy, o.proxyHeader ?? "x-forwarded-for");
  if (trustProxy === true) warnings.emit("trustProxyTrue");
  if (requestsServed && ++createdWhileServing === PER_REQUEST_THRESHOLD) warnings.emit("limiterPerRequest");

  const formats: readonly HeaderFormat[] = o.headers === undefined || o.headers === true
    ? DEFAULT_HEADER_FORMATS
    : o.headers === false ? [] : typeof o.headers === "string" ? [o.headers] : [...new Set(o.headers)];
  // Every draft format writes RateLimit-Policy: at most one of them.
  const drafts = formats.filter((f) => f !== "legacy");
  if (drafts.length > 1) {
    throw invalid("headers", o.headers, `at most one of "draft-6", "draft-7", "draft-11" ("${drafts[0]}" and "${drafts[1]}" both write RateLimit-Policy)`);
  }
  const legacyReset = o.legacyReset ?? "epoch";
  const statusCode = o.statusCode ?? 429;
  const baseStore = o.store ?? o.limiter?.store ?? memoryStore();
  const basePrefix = o.prefix ?? o.limiter?.prefix ?? "fg:";
  const breakerOptions = o.circuitBreaker;
  const breakers = new Map<RateLimitStore, CircuitBreaker>();
  const breakerFor = (store: RateLimitStore): CircuitBreaker | undefined => {
    if (breakerOptions === false) return undefined;
    let b = breakers.get(store);
    if (b === undefined) breakers.set(store, b = new CircuitBreaker(breakerOptions?.failures ?? 5, breakerOptions?.cooldownMs ?? 30_000));
    return b;
  };

  const compile = (name: string, rule: Rule<Raw>, index: number): CompiledRule<Raw> => {
    const r: RuleOptions<Raw> = isPolicy(rule) || Array.isArray(rule) ? { policy: rule as Policy | Policy[] } : rule as RuleOptions<Raw>;
    if ((r.limiter === undefined) === (r.policy === undefined)) {
      throw invalid(`rules.${name}`, rule, "a policy, an array of policies, or { policy | limiter, store?, key?, cost? }");
    }
    // The pattern first: its errors say what is wrong with the rule, not with a prefix made of it.
    const pattern = name === "default" ? undefined : compilePattern(name, caseSensitive);
    const ownPrefix = `${basePrefix}${name}:`;
    const limiter = r.limiter ?? createRateLimiter({
      policy: r.policy!,
      store: r.store ?? baseStore,
      prefix: ownPrefix.length <= 128 ? ownPrefix : `${basePrefix}r${index}:`,
      clock,
    });
    const registry = storeRegistry.get(limiter.store) ?? new Map<string, WeakSet<object>>();
    storeRegistry.set(limiter.store, registry);
    let seen = registry.get(limiter.prefix);
    if (seen === undefined) registry.set(limiter.prefix, seen = new WeakSet());
    return {
      name,
      pattern,
      limiter,
      policies: limiter.policies,
      key: r.key,
      cost: r.cost ?? o.cost ?? 1,
      writeHeaders: createHeaderWriter(formats, limiter.policies, legacyReset),
      breaker: breakerFor(limiter.store),
      fallback: undefined,
      seen,
      watched: 0,
    };
  };

  const patternRules: CompiledRule<Raw>[] = [];
  let defaultRule: CompiledRule<Raw> | undefined;
  let index = 0;
  for (const [name, rule] of Object.entries(o.rules ?? {})) {
    let compiled: CompiledRule<Raw>;
    try {
      compiled = compile(name, rule, index++);
    } catch (error) {
      if (error instanceof FloodgateError && !error.message.startsWith(where)) throw new FloodgateError(error.code, `${where}: option \`rules\`: ${error.message}`);
      throw error;
    }
    if (compiled.pattern === undefined) defaultRule = compiled;
    else patternRules.push(compiled);
  }
  patternRules.sort((a, b) => compareSpecificity(a.pattern!, b.pattern!));
  // The default rule keeps the base prefix as is (no rule name in it).
  if (defaultRule === undefined && (o.limiter !== undefined || o.policy !== undefined)) {
    const limiter = o.limiter ?? createRateLimiter({ policy: o.policy!, store: baseStore, prefix: o.prefix ?? "fg:", clock });
    defaultRule = compile("default", { limiter }, index);
  }
  if (defaultRule === undefined && patternRules.length === 0) {
    throw invalid("policy", undefined, "`limiter`, `policy` (with an optional `store`), or `rules`");
  }

  const allowIps: IpRange[] = [];
  const allowKeys = new Set<string>();
  for (const entry of o.allowList ?? []) {
    const range = parseRange(entry);
    if (range !== undefined) allowIps.push(range);
    else allowKeys.add(entry);
  }

  const storeErrorHook = typeof o.onStoreError === "function" ? o.onStoreError : undefined;
  const storeErrorAction: StoreErrorAction = typeof o.onStoreError === "string" ? o.onStoreError : "fallback";
  const timeoutMs = o.timeoutMs;
  const refundWhen = o.skipSuccessfulRequests || o.skipFailedRequests
    ? (status: number): boolean => status > 0 && status < 400 ? o.skipSuccessfulRequests === true : o.skipFailedRequests === true
    : undefined;

  // The default body: everything but the Retry-After seconds is known now.
  const message = JSON.stringify(typeof o.message === "string" ? o.message : "Too many requests. Please retry after the Retry-After period.");
  const problem = o.format === "problem+json";
  const contentType = problem ? "application/problem+json" : JSON_TYPE;
  const bodyHead = problem
    ? `{"type":"about:blank","title":"Too Many Requests","status":${statusCode},"detail":${message},"retryAfter":`
    : `{"error":{"code":"RATE_LIMITED","message":${message},"retryAfter":`;
  const bodyTail = problem ? "}" : "}}";
  const fixedBody = typeof o.message === "object" ? JSON.stringify(o.message) : undefined;

  const hookFailed = (name: string, error: unknown): void => warnings.log(`the ${name} hook threw: ${errorText(error)}`);
  const callHook = (name: string, hook: ((...args: never[]) => unknown) | undefined, ...args: unknown[]): unknown => {
    try {
      const returned = (hook as ((...a: unknown[]) => unknown) | undefined)?.(...args);
      // An async hook's rejection is logged too, never left unhandled in the host app.
      if (isThenable(returned as MaybePromise<unknown>)) (returned as Promise<unknown>).then(undefined, (error: unknown) => hookFailed(name, error));
      return returned;
    } catch (error) {
      hookFailed(name, error);
    }
  };

  const onStoreFailure = (error: FloodgateError, req: RateLimitRequest<Raw> | undefined): StoreErrorAction => {
    const chosen = callHook("onStoreError", storeErrorHook, error, req);
    return ACTIONS.includes(chosen as StoreErrorAction) ? chosen as StoreErrorAction : storeErrorAction;
  };

  const fallbackOf = (rule: CompiledRule<Raw>): RateLimiter =>
    rule.fallback ??= createRateLimiter({ policy: rule.policies, store: memoryStore(), prefix: rule.limiter.prefix, clock });

  type Outcome = [Decision | undefined, RateLimitInfo["source"], FloodgateError | undefined];

  /**
   * A store call that failed: a bad argument is the caller's (rethrown); anything else counts
   * against the store's breaker (unless its circuit was open already), then the store-error
   * policy decides.
   */
  const storeFailed = async (rule: CompiledRule<Raw>, key: string, cost: number, req: RateLimitRequest<Raw>, thrown: unknown, circuitOpen?: true): Promise<Outcome> => {
    if (thrown instanceof FloodgateError && thrown.code === "INVALID_ARGUMENT") throw thrown;
    if (!circuitOpen) rule.breaker?.failure(clock());
    const error = toStoreError(thrown, rule.limiter.store.name);
    const action = onStoreFailure(error, req);
    if (action === "fallback") return [await fallbackOf(rule).limit(key, cost === 1 ? undefined : { cost }), "fallback", error];
    return [undefined, action, error];
  };

  /**
   * Calls the store with the deadline and the breaker; returns the decision and where it came
   * from. A synchronous store (memory) answers at once: no promise, nothing to time out.
   */
  const consume = (rule: CompiledRule<Raw>, key: string, cost: number, req: RateLimitRequest<Raw>): Outcome | Promise<Outcome> => {
    const breaker = rule.breaker;
    const store = rule.limiter.store;
    const openMs = breaker?.admit(clock()) ?? 0;
    if (openMs > 0) {
      return storeFailed(rule, key, cost, req, new FloodgateError("STORE_UNAVAILABLE", `The ${store.name} store's circuit is open after repeated failures; retrying in ${openMs} ms.`), true);
    }
    let pending: Decision | Promise<Decision>;
    try {
      pending = rule.limiter.decide(key, cost === 1 ? undefined : { cost });
    } catch (thrown) {
      return storeFailed(rule, key, cost, req, thrown);
    }
    if (!(pending instanceof Promise)) {
      breaker?.success();
      return [pending, "store", undefined];
    }
    return (timeoutMs === undefined ? pending : withTimeout(pending, timeoutMs, store.name)).then((decision): Outcome => {
      breaker?.success();
      return [decision, "store", undefined];
    }, (thrown) => storeFailed(rule, key, cost, req, thrown));
  };

  const refund = (rule: CompiledRule<Raw>, limiter: RateLimiter, key: string, cost: number): void => {
    if (limiter === rule.limiter && (rule.breaker?.openFor(clock()) ?? 0) > 0) return;
    let pending: Promise<void>;
    try {
      pending = limiter.refund(key, cost === 1 ? undefined : { cost });
    } catch {
      return;
    }
    const settled = timeoutMs === undefined ? pending : withTimeout(pending, timeoutMs, limiter.store.name);
    settled.then(
      () => { if (limiter === rule.limiter) rule.breaker?.success(); },
      (thrown: unknown) => {
        if (limiter === rule.limiter) rule.breaker?.failure(clock());
        callHook("onStoreError", storeErrorHook, toStoreError(thrown, limiter.store.name), undefined);
      },
    );
  };

  const deniedResponse = async (
    req: RateLimitRequest<Raw>,
    result: RateLimitResult,
    rule: CompiledRule<Raw>,
    now: number,
  ): Promise<DeniedResponse> => {
    // A "deny" after a store failure has no figures: wait out the open circuit, or one second.
    const retryAfter = result.decision === undefined
      ? Math.max(1, Math.ceil((rule.breaker?.openFor(now) ?? 0) / 1000))
      : retryAfterSeconds(result.decision, rule.policies, now);
    const headers = result.headers;
    headers.push(RETRY_AFTER, `${retryAfter}`);
    if (o.handler !== undefined) {
      const custom = await o.handler(req, result);
      const out = [...headers];
      let type: string | undefined;
      for (const [name, value] of Object.entries(custom?.headers ?? {})) {
        if (name.toLowerCase() === "content-type") type = value;
        out.push(name, value);
      }
      const body = custom?.body;
      const text = body === undefined || body === null ? null : typeof body === "string" ? body : JSON.stringify(body);
      if (type === undefined && text !== null) out.push("Content-Type", typeof body === "string" ? "text/plain; charset=utf-8" : JSON_TYPE);
      return { status: custom?.status ?? statusCode, headers: out, body: text };
    }
    return {
      status: statusCode,
      headers: [...headers, "Content-Type", contentType],
      body: fixedBody ?? `${bodyHead}${retryAfter}${bodyTail}`,
    };
  };

  const matchRule = (method: string, path: string): CompiledRule<Raw> | undefined => {
    if (patternRules.length > 0) {
      const normalized = normalizePath(path, caseSensitive);
      for (const rule of patternRules) if (matchesPattern(rule.pattern!, method, normalized)) return rule;
    }
    return defaultRule;
  };

  let forwardedWatched = 0;
  return {
    async check(raw: Raw, socketIp: string | undefined, ipResolved = false): Promise<RateLimitResult | undefined> {
      requestsServed = true;
      const method = access.method(raw).toUpperCase();
      const path = access.path(raw);
      const q = path.indexOf("?");
      const fullPath = q === -1 ? path : path.slice(0, q);

      // The client address, through trusted proxies only.
      let client: ParsedIp | undefined;
      let invalidIp: string | undefined;
      if (ipResolved) {
        client = socketIp === undefined ? undefined : parseIp(socketIp);
        if (client === undefined) invalidIp = socketIp;
      } else {
        const found = resolveIp(socketIp, raw, access.header);
        client = found.ip;
        invalidIp = found.invalid;
      }
      if (invalidIp !== undefined) warnings.emit("invalidIp", `received ${describeValue(invalidIp)}`);
      let ip: string | undefined;
      let grouped: string | undefined;
      if (client !== undefined) {
        ip = formatIp(client);
        grouped = groupIp(client, ipv6Subnet);
      } else {
        warnings.emit("noClientIp");
      }
      if (trustProxy === false && !ipResolved && forwardedWatched < FORWARDED_WATCH && warnings.pending("forwardedHeaderIgnored")) {
        forwardedWatched++;
        if (access.header(raw, "x-forwarded-for") !== undefined || access.header(raw, "forwarded") !== undefined) {
          warnings.emit("forwardedHeaderIgnored");
        }
      }

      const req = new RequestView(raw, method, fullPath, ip, access);
      if (o.skip !== undefined) {
        const skipped = o.skip(req);
        if (isThenable(skipped) ? await skipped : skipped) return undefined;
      }
      if (allowIps.length > 0 && client !== undefined) {
        for (const range of allowIps) if (inRange(client, range)) return undefined;
      }
      const rule = matchRule(method, fullPath);
      if (rule === undefined) return undefined;

      let key: string | undefined;
      const keyFn = rule.key ?? o.key;
      if (keyFn !== undefined) {
        const k = keyFn(req);
        key = isThenable(k) ? await k : k;
      }
      key = key === undefined || key === "" ? grouped ?? "unknown" : fitKey(key);
      if (allowKeys.size > 0 && allowKeys.has(key)) return undefined;

      let cost: number;
      if (typeof rule.cost === "number") cost = rule.cost;
      else {
        const c = rule.cost(req);
        cost = isThenable(c) ? await c : c;
        if (typeof cost !== "number" || !Number.isInteger(cost) || cost < 0) {
          throw new FloodgateError("INVALID_ARGUMENT", `${where}: the \`cost\` function returned ${describeValue(cost)}; expected a whole number >= 0.`);
        }
      }
      if (cost === 0) return undefined;

      // A double mount shows on every request: watching the first ones is enough, and keeps a
      // WeakSet off the hot path afterwards.
      if (rule.watched < DOUBLE_COUNT_WATCH && typeof raw === "object" && raw !== null && warnings.pending("doubleCount")) {
        rule.watched++;
        if (rule.seen.has(raw)) warnings.emit("doubleCount", `rule ${rule.name}, key ${describeValue(key)}`);
        else rule.seen.add(raw);
      }

      const outcome = consume(rule, key, cost, req);
      const [decision, source, storeError] = outcome instanceof Promise ? await outcome : outcome;
      const now = clock();
      const allowed = decision === undefined ? source === "allow" : decision.allowed;
      const headers: string[] = [];
      if (decision !== undefined && rule.writeHeaders !== undefined) rule.writeHeaders(decision, now, headers);
      let settle: ((status: number) => void) | undefined;
      if (refundWhen !== undefined && allowed && decision !== undefined) {
        const charged = source === "fallback" ? rule.fallback! : rule.limiter;
        settle = (status) => { if (refundWhen(status)) refund(rule, charged, key, cost); };
      }
      const result = new RateLimitResult(decision, key, rule.name, cost, source, storeError, allowed, headers, settle);
      // The hooks first: a custom handler that throws fails the request, not the metrics of a denial.
      callHook("onDecision", o.onDecision, result, req);
      if (!allowed) callHook("onLimited", o.onLimited, result, req);
      if (!allowed) result.response = await deniedResponse(req, result, rule, now);
      return result;
    },
  };
}
