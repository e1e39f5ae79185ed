import { describeValue, FloodgateError } from "../errors.ts";
import { createRateLimiter, type RateLimiter } from "../limiter/index.ts";
import { isPolicies, isPolicy, POLICIES_ACCEPTED, type Policy } from "../policies.ts";
import { unwrapStore } from "../stores/resilient-store.ts";
import type { RateLimitStore } from "../stores/store.ts";
import { claimNamespace, policyFingerprint, policySignature, ruleSlug } from "./namespace.ts";
import type { Warnings } from "./warnings.ts";
import { createHeaderWriter, type HeaderFormat, type HeaderWriter } from "./headers.ts";
import {
  type CostFunction,
  type HttpRateLimitOptions,
  invalidHttpOption,
  type KeyFunction,
  type PolicyFunction,
  type Rule,
  RULE_ACCEPTED,
  type RuleOptions,
  type SettledCost,
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

/** A limiter a rule counts in, behind the store-failure policy, with its header writer. */
export interface BoundLimiter {
  readonly limiter: GuardedLimiter;
  readonly policies: readonly Policy[];
  /**
   * Whether requests are reserved and settled when the response ends rather than charged at
   * once: the rule's cost is settled later, or a policy counts requests in flight (concurrency).
   */
  readonly reserves: boolean;
  readonly writeHeaders: HeaderWriter | undefined;
  /** Requests already counted under this limiter's store and prefix, for the double-count warning. */
  readonly seen: WeakSet<object>;
  /** How many requests have been looked up in `seen` so far. */
  watched: number;
}

/** One compiled rule: its limiter (or, with a `policy` function, how to find one per policy set), key and cost. */
export interface CompiledRule<Raw> {
  /** The pattern as written, or `"default"`. */
  readonly name: string;
  readonly pattern: RoutePattern | undefined;
  /** The rule's one limiter; `undefined` when its `policy` is a function of the request. */
  readonly bound: BoundLimiter | undefined;
  /** The rule's `policy` function, when it has one. */
  readonly policyOf: PolicyFunction<Raw> | undefined;
  /**
   * The limiter of one policy set this rule's `policy` function returned (validated here: an
   * INVALID_ARGUMENT error names what it returned), made on first use and kept, at most
   * {@link MAX_POLICY_SETS} per rule.
   */
  boundFor(returned: unknown): BoundLimiter;
  /** The limiters made so far (the one of a static rule). */
  bounds(): Iterable<BoundLimiter>;
  readonly key: KeyFunction<Raw> | undefined;
  /** The units charged up front: the cost, or a settled cost's estimate. */
  readonly cost: number | CostFunction<Raw>;
  /** A settled cost's `actual`, when the rule settles after the response. */
  readonly actual: SettledCost<Raw>["actual"];
  /** The option the cost function came from, for its errors: `cost` or `cost.estimate`. */
  readonly costName: string;
}

/** Most policy sets one rule's `policy` function keeps a limiter for; the least recently used goes first. */
export const MAX_POLICY_SETS = 1000;
/**
 * New policy objects (whose figures match a set already seen) after which a `policy` function is
 * taken to build its policies per request.
 */
const NEW_POLICIES_THRESHOLD = 20;

/** What compiling the rules needs besides the options. */
export interface RuleContext {
  readonly caseSensitive: boolean;
  readonly clock: () => number;
  readonly formats: readonly HeaderFormat[];
  readonly baseStore: RateLimitStore;
  /** The limiter to use for a rule's limiter: over its store behind the middleware's resilient wrapper. */
  readonly guard: (limiter: RateLimiter) => RateLimiter;
  readonly failurePolicy: StoreFailurePolicy;
  /** Where the per-request `policy` warning goes. */
  readonly warnings: Warnings;
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
  /** The rule named `name` as written in `rules` (or `"default"`), if any. */
  byName(name: string): CompiledRule<Raw> | undefined;
  /** Every rule's name, for error messages. */
  readonly names: readonly string[];
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
  const leaseOptions = o.mode === undefined ? {} : { mode: o.mode, ...(o.leaseMs === undefined ? {} : { leaseMs: o.leaseMs }) };
  const basePrefix = o.prefix ?? o.limiter?.prefix ?? "fg:";
  // Without an explicit `prefix`, the policies name the namespace (see namespace.ts).
  const ownNamespace = (prefix: string, policies: readonly Policy[]): string =>
    o.prefix !== undefined ? prefix : `${prefix}${policyFingerprint(policies)}:`;
  const legacyReset = o.legacyReset ?? "epoch";
  const bind = (limiter: RateLimiter, settles: boolean): BoundLimiter => {
    claimNamespace(limiter.store, limiter.prefix, limiter.policies);
    return {
      limiter: new GuardedLimiter(context.guard(limiter), context.failurePolicy),
      policies: limiter.policies,
      reserves: settles || limiter.policies.some((p) => p.kind === "concurrency"),
      writeHeaders: createHeaderWriter(formats, limiter.policies, legacyReset),
      seen: seenOf(limiter),
      watched: 0,
    };
  };
  /** Every policy object a `policy` function has returned: a new one with known figures is one built per request. */
  const policiesSeen = new WeakSet<Policy>();
  let rebuilt = 0;

  const compile = (name: string, rule: Rule<Raw>): CompiledRule<Raw> => {
    const r: RuleOptions<Raw> = isPolicy(rule) || Array.isArray(rule) ? { policy: rule as Policy | Policy[] } : rule as RuleOptions<Raw>;
    if ((r.limiter === undefined) === (r.policy === undefined)) {
      throw invalidHttpOption(`rules.${name}`, rule, `${RULE_ACCEPTED}, with exactly one of \`policy\` and \`limiter\``);
    }
    // The pattern first: its errors say what is wrong with the rule, not with a prefix made of it.
    const pattern = name === "default" ? undefined : compilePattern(name, caseSensitive);
    // The default rule keeps the base prefix as is (no rule name in it).
    const rulePrefix = name === "default" ? basePrefix : `${basePrefix}${ruleSlug(name)}:`;
    const store = r.store ?? baseStore;
    const make = (policies: readonly Policy[], namespace: string): BoundLimiter =>
      bind(createRateLimiter({ policy: policies, store, prefix: namespace, clock, ...leaseOptions }), settled !== undefined);
    const cost = r.cost ?? o.cost ?? 1;
    const settled = typeof cost === "object" ? cost : undefined;
    const base = {
      name,
      pattern,
      key: r.key,
      cost: settled === undefined ? cost as number | CostFunction<Raw> : settled.estimate,
      actual: settled?.actual,
      costName: settled === undefined ? "cost" : "cost.estimate",
    };
    if (typeof r.policy !== "function") {
      const bound = r.limiter !== undefined
        ? bind(r.limiter, settled !== undefined)
        : make(toPolicies(r.policy!), ownNamespace(rulePrefix, toPolicies(r.policy!)));
      return { ...base, bound, policyOf: undefined, boundFor: () => bound, bounds: () => [bound] };
    }
    // One limiter per distinct set, by the identity of what the function returned, else by what
    // the set means (its names, as the headers show them, and its figures); least recently used out first.
    const byValue = new WeakMap<object, BoundLimiter>();
    const bySet = new Map<string, BoundLimiter>();
    const boundFor = (returned: unknown): BoundLimiter => {
      const known = typeof returned === "object" && returned !== null ? byValue.get(returned) : undefined;
      if (known !== undefined) return known;
      const policies = checkPolicies(name, returned);
      const id = `${policies.map((p) => p.name).join(",")}|${policySignature(policies)}`;
      let bound = bySet.get(id);
      if (bound !== undefined) {
        bySet.delete(id);
        if (policies.some((p) => !policiesSeen.has(p)) && ++rebuilt === NEW_POLICIES_THRESHOLD) {
          context.warnings.emit("policyPerRequest", `rule ${name}`);
        }
      } else {
        if (bySet.size >= MAX_POLICY_SETS) {
          bySet.delete(bySet.keys().next().value!);
          context.warnings.emit("policyPerRequest", `rule ${name}: more than ${MAX_POLICY_SETS} distinct policy sets`);
        }
        // Each set in a namespace of its own, even under an explicit `prefix`.
        bound = make(policies, `${rulePrefix}${policyFingerprint(policies)}:`);
      }
      for (const p of policies) policiesSeen.add(p);
      bySet.set(id, bound);
      byValue.set(returned as object, bound);
      return bound;
    };
    return { ...base, bound: undefined, policyOf: r.policy, boundFor, bounds: () => bySet.values() };
  };

  const patternRules: CompiledRule<Raw>[] = [];
  let defaultRule: CompiledRule<Raw> | undefined;
  for (const [name, rule] of Object.entries(o.rules ?? {})) {
    let compiled: CompiledRule<Raw>;
    try {
      compiled = compile(name, rule);
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
    defaultRule = compile("default", o.limiter !== undefined ? { limiter: o.limiter } : { policy: o.policy! });
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
  const all = defaultRule === undefined ? patternRules : [...patternRules, defaultRule];
  return {
    routed: patternRules.length > 0,
    names: all.map((r) => r.name),
    byName: (name) => all.find((r) => r.name === name),
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

const toPolicies = (policy: Policy | readonly Policy[]): readonly Policy[] => (Array.isArray(policy) ? policy : [policy as Policy]);

/** What a `policy` function returned, as a set of policies, or an INVALID_ARGUMENT error naming it. */
function checkPolicies(rule: string, returned: unknown): readonly Policy[] {
  if (isPolicies(returned)) {
    const policies = toPolicies(returned as Policy | readonly Policy[]);
    if (new Set(policies.map((p) => p.name)).size === policies.length) return policies;
  }
  throw new FloodgateError(
    "INVALID_ARGUMENT",
    `${WHERE}: the \`policy\` function${rule === "default" ? "" : ` of rule ${JSON.stringify(rule)}`} returned ${
      describeValue(returned)
    }; it must return ${POLICIES_ACCEPTED} with unique names, or undefined (the rule does not limit the request). The request was not counted.`,
  );
}
