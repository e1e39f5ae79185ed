import { FloodgateError } from "../errors.ts";
import { createRateLimiter, type RateLimiter } from "../limiter.ts";
import { isPolicy, type Policy } from "../policies.ts";
import { unwrapStore } from "../stores/resilient-store.ts";
import type { RateLimitStore } from "../stores/store.ts";
import { claimNamespace, policyFingerprint } from "./namespace.ts";
import { createHeaderWriter, type HeaderFormat, type HeaderWriter } from "./headers.ts";
import {
  type CostFunction,
  type HttpRateLimitOptions,
  invalidHttpOption,
  type KeyFunction,
  type Rule,
  RULE_ACCEPTED,
  type RuleOptions,
  WHERE,
} from "./options.ts";
import { GuardedLimiter, type StoreFailurePolicy } from "./store-guard.ts";

// Rules: "METHOD /path" patterns (compiled, ordered by specificity, matched per request) and the
// limiter, key, cost and header writer each rule compiles to.

/** A compiled `"METHOD /path"` pattern. */
export interface RoutePattern {
  /** The pattern as written, e.g. `"GET /api/orders/:id"`. */
  readonly source: string;
  /** Upper-case method, or `undefined` for any method. */
  readonly method: string | undefined;
  readonly regex: RegExp;
  /** Sort key: higher is more specific. */
  readonly rank: readonly number[];
}

/**
 * The methods a rule may name: RFC 9110's, PATCH, QUERY and the WebDAV and other methods Node's
 * HTTP parser accepts (and so Express and Koa route). A misspelt one (`"GETT"`) would match no
 * request, leaving its route uncounted.
 */
const METHODS = new Set(
  ("GET HEAD POST PUT DELETE CONNECT OPTIONS TRACE PATCH QUERY ACL BIND CHECKOUT COPY LINK LOCK M-SEARCH MERGE MKACTIVITY " +
    "MKCALENDAR MKCOL MOVE NOTIFY PROPFIND PROPPATCH PURGE REBIND REPORT SEARCH SOURCE SUBSCRIBE UNBIND UNLINK UNLOCK UNSUBSCRIBE").split(
      " ",
    ),
);
const SEGMENT = /^(?:\*|:[A-Za-z_][A-Za-z0-9_]*|[^*:/{}]+)$/;

const ABSOLUTE_FORM = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#]*/;

/**
 * The path of a raw request-target (Node's `req.url`) as servers route it: origin-form (`/a?q`)
 * without its query; absolute-form (`http://host/a`, which Node passes on as is and Express and
 * Koa route by its path) without scheme and authority; a fragment (`/a#x`, which they also
 * ignore) dropped. For adapters whose framework hands over the raw target.
 */
export function targetPath(target: string): string {
  // indexOf rather than a regex: this runs on every request.
  let end = target.indexOf("?");
  const hash = target.indexOf("#");
  if (hash !== -1 && (end === -1 || hash < end)) end = hash;
  const p = end === -1 ? target : target.slice(0, end);
  return p.charCodeAt(0) === 47 ? p : p.replace(ABSOLUTE_FORM, "");
}

/** Strips the query, then normalises the path as {@link normalizeRoutePath} does. */
export function normalizePath(path: string, caseSensitive: boolean): string {
  const q = path.indexOf("?");
  return normalizeRoutePath(q === -1 ? path : path.slice(0, q), caseSensitive);
}

/** The form rules match a path (without query) in: percent-escapes decoded where safe, `//` collapsed, no trailing `/`. */
function normalizeRoutePath(path: string, caseSensitive: boolean): string {
  let p = path;
  if (p.includes("%")) {
    try {
      p = decodeURI(p);
    } catch {
      // Malformed escapes: match the raw text.
    }
  }
  if (p.includes("//")) p = p.replace(/\/{2,}/g, "/");
  if (p.length > 1 && p.endsWith("/")) p = p.slice(0, -1);
  if (p[0] !== "/") p = `/${p}`;
  return caseSensitive ? p : p.toLowerCase();
}

const escapeRegex = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/**
 * Compiles `"GET /api/orders/:id"`, `"POST /login"`, `"* /api/*"` or `"/api/*"` (any method).
 * `:name` matches one non-empty segment; `*` one segment, or as the last segment any rest
 * (including none).
 */
export function compilePattern(source: string, caseSensitive: boolean): RoutePattern {
  const text = source.trim();
  const space = text.indexOf(" ");
  const methodText = space === -1 ? "*" : text.slice(0, space);
  const pathText = text.slice(space + 1).trim();
  const invalid = (why: string): FloodgateError =>
    new FloodgateError(
      "INVALID_OPTION",
      `invalid rule ${
        JSON.stringify(source)
      }: ${why}; expected "METHOD /path" (or "/path" for any method) where a segment is literal text (without *, :, { or }), ":name" or "*", or "default".`,
    );
  if (methodText !== "*" && !METHODS.has(methodText.toUpperCase())) {
    throw invalid(`method ${JSON.stringify(methodText)} is not an HTTP method (GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS...) or *`);
  }
  if (pathText[0] !== "/") throw invalid("the path must start with /");
  // Normalised, the path has no empty segment (the root has none at all).
  const path = normalizePath(pathText, true);
  const segments = path === "/" ? [] : path.slice(1).split("/");
  let regex = segments.length === 0 ? "^/" : "^";
  const rank: number[] = segments.map((segment, i) => {
    // Braces cannot be part of a store prefix (Redis hash tags); "{id}" is usually meant as ":id".
    if (!SEGMENT.test(segment)) throw invalid(`segment ${JSON.stringify(segment)} is invalid`);
    if (segment === "*") {
      const last = i === segments.length - 1;
      regex += last ? "(?:/.*)?" : "/[^/]+";
      return last ? 0 : 2;
    }
    if (segment[0] === ":") {
      regex += "/[^/]+";
      return 3;
    }
    regex += `/${escapeRegex(caseSensitive ? segment : segment.toLowerCase())}`;
    return 4;
  });
  // The end of a path without a trailing * ranks above that *: "/api" beats "/api/*" for "/api".
  if (segments[segments.length - 1] !== "*") rank.push(1);
  const method = methodText === "*" ? undefined : methodText.toUpperCase();
  // A method beats any method; HEAD beats GET, the one other method that matches a HEAD request.
  rank.push(method === undefined ? 0 : method === "HEAD" ? 2 : 1);
  return { source, method, regex: new RegExp(`${regex}$`), rank };
}

/** Orders patterns most specific first: per segment literal > :param > * > the path's end > trailing *, then with a method. */
export function compareSpecificity(a: RoutePattern, b: RoutePattern): number {
  const n = Math.max(a.rank.length, b.rank.length);
  for (let i = 0; i < n; i++) {
    const x = a.rank[i] ?? -1;
    const y = b.rank[i] ?? -1;
    if (x !== y) return y - x;
  }
  return 0;
}

/**
 * True when the pattern matches a method and an already-normalised path. A GET pattern also
 * matches HEAD: Express, Hono and koa-router run GET handlers for HEAD requests.
 */
export function matchesPattern(pattern: RoutePattern, method: string, normalizedPath: string): boolean {
  const m = pattern.method;
  return (m === undefined || m === method || (m === "GET" && method === "HEAD")) && pattern.regex.test(normalizedPath);
}

/** One compiled rule: its limiter behind the store-failure policy, key, cost and header writer. */
export interface CompiledRule<Raw> {
  /** The pattern as written, or `"default"`. */
  readonly name: string;
  readonly pattern: RoutePattern | undefined;
  readonly limiter: GuardedLimiter;
  readonly policies: readonly Policy[];
  readonly key: KeyFunction<Raw> | undefined;
  readonly cost: number | CostFunction<Raw>;
  readonly writeHeaders: HeaderWriter | undefined;
  /** Requests already counted under this limiter's store and prefix, for the double-count warning. */
  readonly seen: WeakSet<object>;
  /** How many requests have been looked up in `seen` so far. */
  watched: number;
}

/** What compiling the rules needs besides the options. */
export interface RuleContext {
  readonly caseSensitive: boolean;
  readonly clock: () => number;
  readonly formats: readonly HeaderFormat[];
  readonly baseStore: RateLimitStore;
  /** The limiter to use for a rule's limiter: over its store behind the middleware's resilient wrapper. */
  readonly guard: (limiter: RateLimiter) => RateLimiter;
  readonly failurePolicy: StoreFailurePolicy;
}

/** The rules of one middleware, ready to match requests. */
export interface RuleSet<Raw> {
  /** Whether any rule has a pattern (only then does matching depend on the path). */
  readonly routed: boolean;
  /**
   * The most specific rule matching a method and a path (without query), else the default rule;
   * case-sensitively when `caseSensitive` says so (default: the context's `caseSensitive`).
   */
  match(method: string, path: string, caseSensitive?: boolean): CompiledRule<Raw> | undefined;
}

/**
 * Every limiter's requests seen so far, by store and prefix: two middlewares counting into the same
 * store and prefix share it, so a request counted by both shows up (a double mount).
 */
const seenByStore = new WeakMap<RateLimitStore, Map<string, WeakSet<object>>>();

function seenOf(limiter: RateLimiter): WeakSet<object> {
  // The store under any resilient wrapper: limiters on one store may each have their own.
  const store = unwrapStore(limiter.store);
  let byPrefix = seenByStore.get(store);
  if (byPrefix === undefined) seenByStore.set(store, byPrefix = new Map());
  let seen = byPrefix.get(limiter.prefix);
  if (seen === undefined) byPrefix.set(limiter.prefix, seen = new WeakSet());
  return seen;
}

/** Compiles `o.rules`, plus `o.limiter` or `o.policy` as the default rule when `rules` has none. */
export function compileRules<Raw>(o: HttpRateLimitOptions<Raw>, context: RuleContext): RuleSet<Raw> {
  const { caseSensitive, clock, formats, baseStore } = context;
  const basePrefix = o.prefix ?? o.limiter?.prefix ?? "fg:";
  // Without an explicit `prefix`, the policies name the namespace (see namespace.ts).
  const ownNamespace = (prefix: string, policy: Policy | readonly Policy[]): string =>
    o.prefix !== undefined ? prefix : `${prefix}${policyFingerprint(Array.isArray(policy) ? policy : [policy as Policy])}:`;
  const legacyReset = o.legacyReset ?? "epoch";

  const compile = (name: string, rule: Rule<Raw>, index: number): CompiledRule<Raw> => {
    const r: RuleOptions<Raw> = isPolicy(rule) || Array.isArray(rule) ? { policy: rule as Policy | Policy[] } : rule as RuleOptions<Raw>;
    if ((r.limiter === undefined) === (r.policy === undefined)) {
      throw invalidHttpOption(`rules.${name}`, rule, `${RULE_ACCEPTED}, with exactly one of \`policy\` and \`limiter\``);
    }
    // The pattern first: its errors say what is wrong with the rule, not with a prefix made of it.
    const pattern = name === "default" ? undefined : compilePattern(name, caseSensitive);
    const ownPrefix = r.policy === undefined ? "" : ownNamespace(`${basePrefix}${name}:`, r.policy);
    const limiter = r.limiter ?? createRateLimiter({
      policy: r.policy!,
      store: r.store ?? baseStore,
      // A long pattern would make a prefix the limiter refuses: the rule's position names it instead.
      prefix: ownPrefix.length <= 128 ? ownPrefix : ownNamespace(`${basePrefix}r${index}:`, r.policy!),
      clock,
    });
    claimNamespace(limiter.store, limiter.prefix, limiter.policies);
    return {
      name,
      pattern,
      limiter: new GuardedLimiter(context.guard(limiter), context.failurePolicy),
      policies: limiter.policies,
      key: r.key,
      cost: r.cost ?? o.cost ?? 1,
      writeHeaders: createHeaderWriter(formats, limiter.policies, legacyReset),
      seen: seenOf(limiter),
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
      if (error instanceof FloodgateError && !error.message.startsWith(WHERE)) {
        throw new FloodgateError(error.code, `${WHERE}: option \`rules\`: ${error.message}`);
      }
      throw error;
    }
    if (compiled.pattern === undefined) defaultRule = compiled;
    else patternRules.push(compiled);
  }
  patternRules.sort((a, b) => compareSpecificity(a.pattern!, b.pattern!));
  // The default rule keeps the base prefix as is (no rule name in it).
  if (defaultRule === undefined && (o.limiter !== undefined || o.policy !== undefined)) {
    const limiter = o.limiter ??
      createRateLimiter({ policy: o.policy!, store: baseStore, prefix: ownNamespace(o.prefix ?? "fg:", o.policy!), clock });
    defaultRule = compile("default", { limiter }, index);
  }
  if (defaultRule === undefined && patternRules.length === 0) {
    throw invalidHttpOption(
      "policy",
      undefined,
      "`limiter`, `policy` (with an optional `store`), or `rules`: a middleware needs at least one limit to apply",
    );
  }

  // The patterns in the other case mode, compiled the first time a request asks for it (the
  // framework's routing decides per request when `caseSensitive` is not set).
  let otherMode: RoutePattern[] | undefined;
  return {
    routed: patternRules.length > 0,
    match(method, path, sensitive = caseSensitive) {
      if (patternRules.length > 0) {
        const normalized = normalizeRoutePath(path, sensitive);
        const patterns = sensitive === caseSensitive
          ? undefined
          : (otherMode ??= patternRules.map((r) => compilePattern(r.name, sensitive)));
        for (let i = 0; i < patternRules.length; i++) {
          if (matchesPattern(patterns?.[i] ?? patternRules[i]!.pattern!, method, normalized)) return patternRules[i];
        }
      }
      return defaultRule;
    },
  };
}
