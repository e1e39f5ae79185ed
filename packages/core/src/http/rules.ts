import { describeValue, FloodgateError } from "../errors.ts";
import { createRateLimiter, type Decision, type RateLimiter } from "../limiter/index.ts";
import { isPolicies, isPolicy, POLICIES_ACCEPTED, type Policy } from "../policies.ts";
import { unwrapStore } from "../stores/resilient-store.ts";
import type { RateLimitStore } from "../stores/store.ts";
import { claimNamespace, policyFingerprint, policySignature, ruleSlug } from "./namespace.ts";
import type { Warnings } from "./warnings.ts";
import { createHeaderWriter, type HeaderFormat, type HeaderWriter, type ReportedFigures, reportedFigures } from "./headers.ts";
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
import { FailoverLimiter } from "./failover.ts";
import { type Enforcement, enforcementOf } from "./enforcement.ts";
import { holdsInFlight } from "./in-flight.ts";
import { compareSpecificity, compilePattern, matchesPattern, normalizeRoutePath, type RoutePattern } from "./routes.ts";
import type { StoreErrorHandling } from "./store-errors.ts";
import type { RequestRateLimitInfo } from "./result.ts";

// Rules: the limiter, key, cost and header writer each rule compiles to, and the rule a request
// matches (patterns in routes.ts).

/**
 * What a rule counts in: a limiter behind the store-error handling (a {@link FailoverLimiter}),
 * or the same calls over a rule's dimensions (dimensions/compound-counter.ts).
 */
export type RuleCounter = Pick<FailoverLimiter, "consume" | "reserve" | "finish" | "refund" | "openForMs" | "flush" | "reset" | "limiter">;

/** A limiter a rule counts in, behind the store-error handling, with its header writer. */
export interface RuleLimiter {
  readonly limiter: RuleCounter;
  readonly policies: readonly Policy[];
  /**
   * Whether requests are reserved and settled when the response ends rather than charged at
   * once: the rule's cost is settled later, or a policy counts requests in flight (concurrency).
   */
  readonly reserves: boolean;
  readonly writeHeaders: HeaderWriter | undefined;
  /** Which policy a decision's `limit`, `remaining` and `resetAt` describe (see `reportedFigures`). */
  readonly figures: (decision: Decision) => ReportedFigures;
  /** The decision info's class, when not {@link RequestRateLimitInfo} (a rule with `dimensions` reports theirs). */
  readonly Info?: typeof RequestRateLimitInfo;
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
  readonly single: RuleLimiter | undefined;
  /** The rule's `policy` function, when it has one. */
  readonly policyOf: PolicyFunction<Raw> | undefined;
  /**
   * The limiter of one policy set this rule's `policy` function returned (validated here: an
   * INVALID_ARGUMENT error names what it returned), made on first use and kept, at most
   * {@link MAX_POLICY_SETS} per rule.
   */
  limiterFor(returned: unknown): RuleLimiter;
  /** The limiters made so far (the one of a static rule). */
  limiters(): Iterable<RuleLimiter>;
  readonly key: KeyFunction<Raw> | undefined;
  /** The units charged up front: the cost, or a settled cost's estimate. */
  readonly cost: number | CostFunction<Raw>;
  /** A settled cost's `actual`, when the rule settles after the response. */
  readonly actual: SettledCost<Raw>["actual"];
  /** The option the cost function came from, for its errors: `cost` or `cost.estimate`. */
  readonly costName: string;
  /** Whether the cost is `{ estimate, actual? }`, settled when the response ends. */
  readonly settledCost: boolean;
  /** Whether a request of a key is enforced (`shadow`, `enforce`); `undefined`: every request is. */
  readonly enforced: Enforcement;
  /** Whether requests in shadow get the rate-limit headers. */
  readonly shadowHeaders: boolean;
}

/** What a compiled rule is besides its limiter: its name, pattern, key, cost and rollout. */
export type RuleBase<Raw> = Omit<CompiledRule<Raw>, "single" | "policyOf" | "limiterFor" | "limiters">;

/**
 * What a rule's `dimensions` value is to this module (see dimensions/contract.ts): called once
 * per rule with what was compiled of it, the rule's options, the middleware's and the context;
 * returns the compiled rule.
 */
export type RuleCompiler = <Raw>(
  base: RuleBase<Raw>,
  rule: RuleOptions<Raw>,
  options: HttpRateLimitOptions<Raw>,
  context: RuleContext,
) => CompiledRule<Raw>;

/** Most policy sets one rule's `policy` function keeps a limiter for; the least recently used goes first. */
export const MAX_POLICY_SETS = 1000;
/**
 * New policy objects (whose figures match a set already seen) after which a `policy` function is
 * taken to build its policies per request.
 */
export const NEW_POLICIES_THRESHOLD = 20;

/** What compiling the rules needs besides the options. */
export interface RuleContext {
  readonly caseSensitive: boolean;
  readonly clock: () => number;
  readonly formats: readonly HeaderFormat[];
  readonly baseStore: RateLimitStore;
  /** The store a rule's limiter calls: its store behind the middleware's resilient wrapper. */
  readonly resilient: (store: RateLimitStore) => RateLimitStore;
  readonly onStoreError: StoreErrorHandling;
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
  // A limiter the middleware builds is built once, over its store behind the middleware's
  // resilience; a ready one (`limiter`) is used as it is, with the resilience it was made with.
  const ruleLimiter = (limiter: RateLimiter, settles: boolean): RuleLimiter => {
    // The store under any resilient wrapper: every middleware on one store sees the others' claims.
    claimNamespace(unwrapStore(limiter.store), limiter.prefix, limiter.policies);
    return {
      limiter: new FailoverLimiter(limiter, context.onStoreError),
      policies: limiter.policies,
      reserves: settles || limiter.policies.some(holdsInFlight) || (limiter.shadowPolicies?.some(holdsInFlight) ?? false),
      writeHeaders: createHeaderWriter(formats, limiter.policies, legacyReset),
      figures: reportedFigures(limiter.policies),
      seen: seenOf(limiter),
      watched: 0,
    };
  };
  /** Every policy object a `policy` function has returned: a new one with known figures is one built per request. */
  const policiesSeen = new WeakSet<Policy>();
  let rebuilt = 0;

  const compile = (name: string, rule: Rule<Raw>): CompiledRule<Raw> => {
    const r: RuleOptions<Raw> = isPolicy(rule) || Array.isArray(rule) ? { policy: rule as Policy | Policy[] } : rule as RuleOptions<Raw>;
    if (r.dimensions === undefined && (r.limiter === undefined) === (r.policy === undefined)) {
      throw invalidHttpOption(`rules.${name}`, rule, `${RULE_ACCEPTED}, with exactly one of \`policy\` and \`limiter\``);
    }
    // The pattern first: its errors say what is wrong with the rule, not with a prefix made of it.
    const pattern = name === "default" ? undefined : compilePattern(name, caseSensitive);
    // The default rule keeps the base prefix as is (no rule name in it).
    const rulePrefix = name === "default" ? basePrefix : `${basePrefix}${ruleSlug(name)}:`;
    const store = r.store ?? baseStore;
    // The default rule made of the top-level `policy` takes the top-level `shadowPolicy` with it.
    const shadowPolicy = r.shadowPolicy;
    const warnAt = r.warnAt ?? o.warnAt;
    if (r.limiter !== undefined && (shadowPolicy !== undefined || r.warnAt !== undefined)) {
      throw invalidHttpOption(
        `rules.${name}`,
        rule,
        "`shadowPolicy` and `warnAt` beside `policy`, not a ready `limiter` (create the limiter with its own)",
      );
    }
    const observed = {
      ...(shadowPolicy === undefined ? {} : { shadowPolicy }),
      ...(warnAt === undefined ? {} : { warnAt }),
    };
    const make = (policies: readonly Policy[], namespace: string): RuleLimiter =>
      ruleLimiter(
        createRateLimiter({ policy: policies, store: context.resilient(store), prefix: namespace, clock, ...leaseOptions, ...observed }),
        settled !== undefined,
      );
    const cost = r.cost ?? o.cost ?? 1;
    const settled = typeof cost === "object" ? cost : undefined;
    const base = {
      name,
      pattern,
      key: r.key,
      cost: settled === undefined ? cost as number | CostFunction<Raw> : settled.estimate,
      actual: settled?.actual,
      costName: settled === undefined ? "cost" : "cost.estimate",
      settledCost: settled !== undefined,
      enforced: enforcementOf(r, o, name),
      shadowHeaders: r.shadowHeaders ?? o.shadowHeaders ?? false,
    };
    // A rule over several keys compiles itself (dimensions/): an app without one bundles none of it.
    if (r.dimensions !== undefined) return (r.dimensions as unknown as RuleCompiler)(base, r, o, context);
    if (typeof r.policy !== "function") {
      const single = r.limiter !== undefined
        ? ruleLimiter(r.limiter, settled !== undefined)
        : make(toPolicies(r.policy!), ownNamespace(rulePrefix, toPolicies(r.policy!)));
      return { ...base, single, policyOf: undefined, limiterFor: () => single, limiters: () => [single] };
    }
    // One limiter per distinct set, by the identity of what the function returned, else by what
    // the set means (its names, as the headers show them, and its figures); least recently used out first.
    const byValue = new WeakMap<object, RuleLimiter>();
    const bySet = new Map<string, RuleLimiter>();
    const limiterFor = (returned: unknown): RuleLimiter => {
      const known = typeof returned === "object" && returned !== null ? byValue.get(returned) : undefined;
      if (known !== undefined) return known;
      const policies = checkPolicies(name, returned);
      const id = `${policies.map((p) => p.name).join(",")}|${policySignature(policies)}`;
      let made = bySet.get(id);
      if (made !== undefined) {
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
        made = make(policies, `${rulePrefix}${policyFingerprint(policies)}:`);
      }
      for (const p of policies) policiesSeen.add(p);
      bySet.set(id, made);
      byValue.set(returned as object, made);
      return made;
    };
    return { ...base, single: undefined, policyOf: r.policy, limiterFor, limiters: () => bySet.values() };
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
    defaultRule = compile(
      "default",
      o.limiter !== undefined
        ? { limiter: o.limiter }
        : o.shadowPolicy === undefined
        ? { policy: o.policy! }
        : { policy: o.policy!, shadowPolicy: o.shadowPolicy },
    );
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
