import { createCompoundLimiter } from "../../compound/create.ts";
import { MAX_DIMENSIONS } from "../../compound/create.ts";
import type { CompoundCharge, CompoundKeys, CompoundLimiter } from "../../compound/types.ts";
import type { RateLimitInfo } from "../info.ts";
import { describeValue, FloodgateError } from "../../errors.ts";
import { createRateLimiter, type RateLimiter } from "../../limiter/index.ts";
import { isPolicies, POLICIES_ACCEPTED, type Policy } from "../../policies.ts";
import { memoryStore } from "../../stores/memory-store.ts";
import { unwrapStore } from "../../stores/resilient-store.ts";
import { isThenable, type MaybePromise, type RateLimitStore } from "../../stores/store.ts";
import { closest, isRecord } from "../../validation.ts";
import { holdsInFlight } from "../in-flight.ts";
import { groupIp, parseIp } from "../ip.ts";
import { called, fitKey } from "../keys.ts";
import { claimNamespace, policyFingerprint, ruleSlug } from "../namespace.ts";
import { type HttpRateLimitOptions, invalidHttpOption, type KeyFunction, type PolicyFunction, type RuleOptions } from "../options.ts";
import type { RateLimitRequest } from "../request.ts";
import { MAX_POLICY_SETS, type RuleLimiter } from "../rules.ts";
import type { Warnings } from "../warnings.ts";
import { policySets } from "./policy-sets.ts";
import { CompoundCounter } from "./compound-counter.ts";
import { compoundHeaderWriter } from "./compound-headers.ts";
import { CompoundRateLimitInfo } from "./compound-info.ts";
import type { RuleDimensions } from "./contract.ts";
import type { HeaderFormat } from "../headers.ts";
import type { CompiledRule, RuleBase, RuleCompiler, RuleContext } from "../rules.ts";
import type { StoreErrorHandling } from "../store-errors.ts";

// `dimensions({...})`: a rule's option naming several keys, each with its own policy, decided
// together (all or nothing) by a compound limiter. Only an app that calls it bundles this code
// and the compound limiter: the HTTP layer knows its value through contract.ts alone.

/** One dimension of a rule: its key and policy, as a rule of one key has them. */
export interface DimensionOptions<Raw = any> {
  /**
   * Its policy, or several (all checked); or a function of the request returning them (per-plan
   * limits): each distinct set counts in a namespace of its own, as a rule's `policy` function's.
   */
  policy: Policy | readonly Policy[] | DimensionPolicyFunction<Raw>;
  /** Its key (default: the rule's `key`, then the middleware's, then the client address). */
  key?: KeyFunction<Raw>;
  /** Its store (default: the rule's). Dimensions on one memory store or Redis database are decided in one step. */
  store?: RateLimitStore;
  /** Policies decided and reported but never enforced (see the rule option of the same name). */
  shadowPolicy?: Policy | readonly Policy[];
  /** Warning thresholds (see the rule option of the same name); default the middleware's. */
  warnAt?: number | Readonly<Record<string, number>>;
}

/** A dimension's `policy` as a function of the request: its policies for this request. */
export type DimensionPolicyFunction<Raw = any> = (req: RateLimitRequest<Raw>) => MaybePromise<Policy | readonly Policy[]>;

const WHERE = "dimensions()";
const OPTIONS = ["policy", "key", "store", "shadowPolicy", "warnAt"];
/** A dimension's name: it names a header item and a namespace. */
const NAME = /^[A-Za-z0-9_-]{1,64}$/;

const invalid = (what: string): never => {
  throw new FloodgateError("INVALID_OPTION", `${WHERE}: ${what}`);
};

const toPolicies = (p: Policy | readonly Policy[]): readonly Policy[] => (Array.isArray(p) ? p : [p as Policy]);

/**
 * The `dimensions` option of a rule: several keys, each with its own policy, decided as one
 * (every dimension admits the request and is charged, or none is). The decision's figures are
 * the binding dimension's (`info.dimension`); every dimension's are in `info.dimensions`.
 *
 * @example
 * rateLimit({
 *   rules: {
 *     "POST /api/*": {
 *       dimensions: dimensions({
 *         user: { key: (req) => req.header("x-user"), policy: slidingWindow({ limit: 100, window: "1m" }) },
 *         org: { key: (req) => req.header("x-org"), policy: fixedWindow({ limit: 10_000, window: "1d" }) },
 *       }),
 *     },
 *   },
 * });
 */
export function dimensions<D extends string, Raw = any>(spec: Readonly<Record<D, DimensionOptions<Raw>>>): RuleDimensions<D> {
  if (!isRecord(spec)) invalid(`received ${describeValue(spec)}; expected an object of dimensions by name, each { policy, key?, store? }.`);
  const names = Object.keys(spec) as D[];
  if (names.length < 1 || names.length > MAX_DIMENSIONS) invalid(`received ${names.length} dimensions; expected 1 to ${MAX_DIMENSIONS}.`);
  const all = spec as Readonly<Record<string, DimensionOptions<Raw>>>;
  for (const name of names) {
    if (!NAME.test(name)) invalid(`dimension name ${JSON.stringify(name)}: expected 1 to 64 letters, digits, "_" or "-".`);
    const d = all[name];
    if (!isRecord(d)) invalid(`dimension "${name}" is ${describeValue(d)}; expected { policy, key?, store?, shadowPolicy?, warnAt? }.`);
    for (const option of Object.keys(d!)) {
      if (!OPTIONS.includes(option)) {
        const guess = closest(option, OPTIONS);
        invalid(
          `dimension "${name}": unknown option \`${option}\`${
            guess === undefined ? "" : ` (did you mean \`${guess}\`?)`
          }; a dimension is { policy, key?, store?, shadowPolicy?, warnAt? }.`,
        );
      }
    }
    if (!isPolicies(d!.policy) && typeof d!.policy !== "function") {
      invalid(
        `dimension "${name}": option \`policy\` is ${
          describeValue(d!.policy)
        }; expected ${POLICIES_ACCEPTED}, or a function of the request returning them.`,
      );
    }
    if (d!.key !== undefined && typeof d!.key !== "function") {
      invalid(`dimension "${name}": option \`key\` is ${describeValue(d!.key)}; expected a function of the request.`);
    }
  }
  /** The compound limiter of every rule compiled with this value, for `limiter()`. */
  const made: CompoundLimiter[] = [];
  const rule: RuleCompiler = <R>(
    base: RuleBase<R>,
    r: RuleOptions<R>,
    o: HttpRateLimitOptions<R>,
    context: RuleContext,
  ): CompiledRule<R> => {
    const own = ["policy", "limiter", "shadowPolicy", "warnAt"].find((n) => r[n as keyof RuleOptions<R>] !== undefined);
    if (own !== undefined) {
      throw invalidHttpOption(
        `rules.${base.name}`,
        r,
        `\`dimensions\` without \`${own}\` (each dimension takes its own \`policy\`, \`shadowPolicy\` and \`warnAt\`)`,
      );
    }
    // The namespace the rule's `policy` would count in, as rules.ts makes it; each dimension under it.
    const basePrefix = o.prefix ?? o.limiter?.prefix ?? "fg:";
    const { counted, key, compound, policyOf, limiterFor, limiters } = compile(names, all, {
      rule: base.name,
      prefix: base.name === "default" ? basePrefix : `${basePrefix}${ruleSlug(base.name)}:`,
      fingerprint: o.prefix === undefined,
      store: r.store ?? context.baseStore,
      resilient: context.resilient,
      clock: context.clock,
      onStoreError: context.onStoreError,
      formats: context.formats,
      legacyReset: o.legacyReset ?? "epoch",
      key: r.key ?? o.key,
      ipv6Subnet: o.ipv6Subnet ?? 64,
      settles: base.settledCost,
      warnAt: o.warnAt,
      warnings: context.warnings,
    });
    if (counted === undefined) return { ...base, key, single: undefined, policyOf, limiterFor: limiterFor!, limiters: limiters! };
    made.push(compound!);
    return { ...base, key, single: counted, policyOf: undefined, limiterFor: () => counted, limiters: () => [counted] };
  };
  const limiter = (): CompoundLimiter<D> => {
    if (made.length === 1) return made[0] as CompoundLimiter<D>;
    if (names.some((n) => typeof all[n]!.policy === "function")) {
      throw new FloodgateError(
        "INVALID_ARGUMENT",
        `${WHERE}.limiter(): a dimension's \`policy\` is a function of the request, so the rule counts in a compound limiter per policy set; refund a request through the middleware (\`skipFailedRequests\`, \`skipSuccessfulRequests\`, a settled \`cost\`).`,
      );
    }
    throw new FloodgateError(
      "INVALID_ARGUMENT",
      `${WHERE}.limiter(): this value is the \`dimensions\` of ${made.length} rules${
        made.length === 0 ? " (no middleware was made with it yet)" : ""
      }; give each rule its own dimensions() to address its counters.`,
    );
  };
  const refund = async (info: RateLimitInfo, options?: { cost?: number }): Promise<void> => {
    const compound = limiter();
    // A rule over dimensions charges a compound charge; a request not charged has none.
    if (info.charge !== undefined) await compound.refund(info.charge as unknown as CompoundCharge, options);
  };
  return Object.freeze(Object.assign(rule, { names: Object.freeze(names), limiter, refund })) as unknown as RuleDimensions<D>;
}

/** What compiling a rule's dimensions needs of the rule and the middleware. */
interface DimensionRuleContext<Raw> {
  readonly rule: string;
  /** The rule's namespace prefix; each dimension counts under `${prefix}${dimension}:`. */
  readonly prefix: string;
  /** Whether each dimension's namespace also names its policies (no explicit `prefix` was given). */
  readonly fingerprint: boolean;
  /** The rule's store, for dimensions without their own. */
  readonly store: RateLimitStore;
  readonly resilient: (store: RateLimitStore) => RateLimitStore;
  readonly clock: () => number;
  readonly onStoreError: StoreErrorHandling;
  readonly formats: readonly HeaderFormat[];
  readonly legacyReset: "epoch" | "delta";
  /** The key of a dimension without its own: the rule's `key`, else the middleware's; else the client address. */
  readonly key: KeyFunction<Raw> | undefined;
  readonly ipv6Subnet: number;
  /** Whether the rule's cost is settled after the response. */
  readonly settles: boolean;
  readonly warnAt: number | Readonly<Record<string, number>> | undefined;
  /** Where the per-request `policy` warning goes. */
  readonly warnings: Warnings;
}

/** What compiling a rule's dimensions makes: its key function, and its one limiter or how to find one per policy set. */
interface CompiledDimensions<Raw> {
  readonly key: KeyFunction<Raw>;
  /** The rule's one limiter, when no dimension's `policy` is a function. */
  readonly counted: RuleLimiter | undefined;
  readonly compound: CompoundLimiter | undefined;
  /** Every dimension's `policy` for the request (what its function returned), when some dimension's is a function. */
  readonly policyOf: PolicyFunction<Raw> | undefined;
  readonly limiterFor: ((returned: unknown) => RuleLimiter) | undefined;
  readonly limiters: (() => Iterable<RuleLimiter>) | undefined;
}

/** One dimension's limiter over one policy set, in the set's namespace. */
interface DimensionLimiter {
  readonly id: number;
  readonly policies: readonly Policy[];
  readonly prefix: string;
  readonly limiter: RateLimiter;
  readonly store: RateLimitStore;
}

/** The rule's limiter over its dimensions (or one per combination of policy sets), and its key function. */
function compile<Raw>(
  names: readonly string[],
  spec: Readonly<Record<string, DimensionOptions<any>>>,
  c: DimensionRuleContext<Raw>,
): CompiledDimensions<Raw> {
  const observed = (name: string) => {
    const d = spec[name]!;
    const warnAt = d.warnAt ?? c.warnAt;
    return { ...(d.shadowPolicy === undefined ? {} : { shadowPolicy: d.shadowPolicy }), ...(warnAt === undefined ? {} : { warnAt }) };
  };
  let made = 0;
  /** A dimension's limiter over `policies`, in `prefix`. */
  const dimensionLimiter = (name: string, policies: readonly Policy[], prefix: string): DimensionLimiter => {
    const store = c.resilient(spec[name]!.store ?? c.store);
    claimNamespace(unwrapStore(store), prefix, policies);
    const limiter = createRateLimiter({ policy: policies, store, prefix, clock: c.clock, ...observed(name) });
    return { id: made++, policies, prefix, limiter, store };
  };
  // The local stand-in when a store fails and `onStoreError` says "fallback": one memory store.
  let local: RateLimitStore | undefined;
  /** The rule's counter over one limiter per dimension. */
  const counterOver = (chosen: readonly DimensionLimiter[]): { counted: RuleLimiter; compound: CompoundLimiter } => {
    const limiters: Record<string, RateLimiter> = {};
    names.forEach((name, i) => limiters[name] = chosen[i]!.limiter);
    const compound = createCompoundLimiter({ dimensions: limiters });
    const makeFallback = () => {
      const fallback: Record<string, RateLimiter> = {};
      local ??= memoryStore();
      names.forEach((name, i) => {
        const { policies, prefix } = chosen[i]!;
        fallback[name] = createRateLimiter({ policy: policies, store: local!, prefix, clock: c.clock, ...observed(name) });
      });
      return createCompoundLimiter({ dimensions: fallback });
    };
    const policies = chosen.flatMap((d) => d.policies);
    const counted: RuleLimiter = {
      limiter: new CompoundCounter(
        compound,
        c.onStoreError,
        c.rule,
        (req) => keysByRequest.get(req)!,
        makeFallback,
        chosen.map((d) => d.store),
      ),
      policies,
      reserves: c.settles || policies.some(holdsInFlight) ||
        names.some((n) => spec[n]!.shadowPolicy !== undefined && toPolicies(spec[n]!.shadowPolicy!).some(holdsInFlight)),
      writeHeaders: compoundHeaderWriter(c.formats, names.map((name, i) => ({ name, policies: chosen[i]!.policies })), c.legacyReset),
      figures: (d) => d,
      Info: CompoundRateLimitInfo,
      seen: new WeakSet(),
      watched: 0,
    };
    return { counted, compound };
  };

  // The request's key of every dimension, named by the rule's key function before it is counted.
  const keysByRequest = new WeakMap<object, CompoundKeys>();
  const clientKey = (req: RateLimitRequest<Raw>): string => {
    const ip = req.ip === undefined ? undefined : parseIp(req.ip);
    return ip === undefined ? "unknown" : groupIp(ip, c.ipv6Subnet);
  };
  const checked = (name: string, returned: unknown, req: RateLimitRequest<Raw>): string => {
    if (returned === undefined || returned === "") return clientKey(req);
    if (typeof returned === "string") return fitKey(returned);
    throw new FloodgateError(
      "INVALID_ARGUMENT",
      `rateLimit(): the \`key\` function of dimension "${name}" returned ${
        describeValue(returned)
      }; it must return a string, or undefined or "" for the client's address. The request was not counted.`,
    );
  };
  const named = (req: RateLimitRequest<Raw>, keys: readonly string[]): string => {
    const byName: Record<string, string> = {};
    for (let i = 0; i < names.length; i++) byName[names[i]!] = keys[i]!;
    keysByRequest.set(req, byName);
    return names.map((n) => `${n}=${byName[n]}`).join("&");
  };
  const key: KeyFunction<Raw> = (req) => {
    const returned = names.map((n) => {
      const fn = (spec[n]!.key ?? c.key) as KeyFunction<Raw> | undefined;
      return fn === undefined ? undefined : called(`key`, fn, req);
    });
    if (!returned.some(isThenable)) return named(req, returned.map((r, i) => checked(names[i]!, r, req)));
    return Promise.all(returned).then((all) => named(req, all.map((r, i) => checked(names[i]!, r, req))));
  };

  const fixed = (name: string) => typeof spec[name]!.policy !== "function";
  if (names.every(fixed)) {
    const chosen = names.map((name) => {
      const policies = toPolicies(spec[name]!.policy as Policy | readonly Policy[]);
      return dimensionLimiter(name, policies, `${c.prefix}${name}:${c.fingerprint ? `${policyFingerprint(policies)}:` : ""}`);
    });
    return { key, ...counterOver(chosen), policyOf: undefined, limiterFor: undefined, limiters: undefined };
  }
  // A dimension's `policy` function: a limiter per distinct set it returns (each set in a namespace
  // of its own, even under an explicit `prefix`), and a counter per combination of them; both bounded.
  const choose = names.map((name) => {
    if (fixed(name)) {
      const policies = toPolicies(spec[name]!.policy as Policy | readonly Policy[]);
      const only = dimensionLimiter(name, policies, `${c.prefix}${name}:${c.fingerprint ? `${policyFingerprint(policies)}:` : ""}`);
      return () => only;
    }
    return policySets(
      c.rule,
      name,
      (policies) => dimensionLimiter(name, policies, `${c.prefix}${name}:${policyFingerprint(policies)}:`),
      c.warnings,
    );
  });
  const policyOf: PolicyFunction<Raw> = (req) => {
    const returned = names.map((name) => {
      const p = spec[name]!.policy;
      return typeof p === "function" ? called(`dimensions.${name}.policy`, p, req) : p;
    });
    return (returned.some(isThenable) ? Promise.all(returned) : returned) as unknown as Policy[];
  };
  const combinations = new Map<string, RuleLimiter>();
  const limiterFor = (returned: unknown): RuleLimiter => {
    if (!Array.isArray(returned) || returned.length !== names.length) {
      throw new FloodgateError(
        "INVALID_ARGUMENT",
        `rateLimit(): rule ${
          JSON.stringify(c.rule)
        } counts over dimensions whose policy is a function of the request; address its counters through the request.`,
      );
    }
    const chosen = choose.map((pick, i) => pick(returned[i]));
    const id = chosen.map((d) => d.id).join(",");
    let counted = combinations.get(id);
    if (counted !== undefined) combinations.delete(id);
    else {
      if (combinations.size >= MAX_POLICY_SETS) combinations.delete(combinations.keys().next().value!);
      counted = counterOver(chosen).counted;
    }
    combinations.set(id, counted);
    return counted;
  };
  return { key, counted: undefined, compound: undefined, policyOf, limiterFor, limiters: () => combinations.values() };
}
