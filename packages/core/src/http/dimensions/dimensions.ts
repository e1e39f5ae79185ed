import { createCompoundLimiter } from "../../compound/create.ts";
import { MAX_DIMENSIONS } from "../../compound/create.ts";
import type { CompoundCharge, CompoundKeys, CompoundLimiter } from "../../compound/types.ts";
import type { RateLimitInfo } from "../info.ts";
import { describeValue, FloodgateError } from "../../errors.ts";
import { createRateLimiter, type RateLimiter } from "../../limiter/index.ts";
import { isPolicies, POLICIES_ACCEPTED, type Policy } from "../../policies.ts";
import { memoryStore } from "../../stores/memory-store.ts";
import { unwrapStore } from "../../stores/resilient-store.ts";
import { isThenable, type RateLimitStore } from "../../stores/store.ts";
import { closest, isRecord } from "../../validation.ts";
import { holdsInFlight } from "../in-flight.ts";
import { groupIp, parseIp } from "../ip.ts";
import { called, fitKey } from "../keys.ts";
import { claimNamespace, policyFingerprint, ruleSlug } from "../namespace.ts";
import { type HttpRateLimitOptions, invalidHttpOption, type KeyFunction, type RuleOptions } from "../options.ts";
import type { RateLimitRequest } from "../request.ts";
import type { RuleLimiter } from "../rules.ts";
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
  /** Its policy, or several (all checked). */
  policy: Policy | readonly Policy[];
  /** Its key (default: the rule's `key`, then the middleware's, then the client address). */
  key?: KeyFunction<Raw>;
  /** Its store (default: the rule's). Dimensions on one memory store or Redis database are decided in one step. */
  store?: RateLimitStore;
  /** Policies decided and reported but never enforced (see the rule option of the same name). */
  shadowPolicy?: Policy | readonly Policy[];
  /** Warning thresholds (see the rule option of the same name); default the middleware's. */
  warnAt?: number | Readonly<Record<string, number>>;
}

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
    if (!isPolicies(d!.policy)) {
      invalid(`dimension "${name}": option \`policy\` is ${describeValue(d!.policy)}; expected ${POLICIES_ACCEPTED}.`);
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
    const { counted, key, compound } = compile(names, all, {
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
    });
    made.push(compound);
    return { ...base, key, single: counted, policyOf: undefined, limiterFor: () => counted, limiters: () => [counted] };
  };
  const limiter = (): CompoundLimiter<D> => {
    if (made.length === 1) return made[0] as CompoundLimiter<D>;
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
}

/** The rule's limiter over its dimensions, and its key function. */
function compile<Raw>(
  names: readonly string[],
  spec: Readonly<Record<string, DimensionOptions<any>>>,
  c: DimensionRuleContext<Raw>,
): { counted: RuleLimiter; key: KeyFunction<Raw>; compound: CompoundLimiter } {
  const policiesOf = (name: string): readonly Policy[] => toPolicies(spec[name]!.policy);
  const prefixOf = (name: string): string => `${c.prefix}${name}:${c.fingerprint ? `${policyFingerprint(policiesOf(name))}:` : ""}`;
  const observed = (name: string) => {
    const d = spec[name]!;
    const warnAt = d.warnAt ?? c.warnAt;
    return { ...(d.shadowPolicy === undefined ? {} : { shadowPolicy: d.shadowPolicy }), ...(warnAt === undefined ? {} : { warnAt }) };
  };
  const limiters: Record<string, RateLimiter> = {};
  const stores: RateLimitStore[] = [];
  for (const name of names) {
    const store = c.resilient(spec[name]!.store ?? c.store);
    stores.push(store);
    claimNamespace(unwrapStore(store), prefixOf(name), policiesOf(name));
    limiters[name] = createRateLimiter({ policy: policiesOf(name), store, prefix: prefixOf(name), clock: c.clock, ...observed(name) });
  }
  const compound = createCompoundLimiter({ dimensions: limiters });
  // The local stand-in when a store fails and `onStoreError` says "fallback": one memory store.
  const makeFallback = () => {
    const local = memoryStore();
    const made: Record<string, RateLimiter> = {};
    for (const name of names) {
      made[name] = createRateLimiter({ policy: policiesOf(name), store: local, prefix: prefixOf(name), clock: c.clock, ...observed(name) });
    }
    return createCompoundLimiter({ dimensions: made });
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

  const policies = names.flatMap(policiesOf);
  const counted: RuleLimiter = {
    limiter: new CompoundCounter(compound, c.onStoreError, c.rule, (req) => keysByRequest.get(req)!, makeFallback, stores),
    policies,
    reserves: c.settles || policies.some(holdsInFlight) ||
      names.some((n) => spec[n]!.shadowPolicy !== undefined && toPolicies(spec[n]!.shadowPolicy!).some(holdsInFlight)),
    writeHeaders: compoundHeaderWriter(c.formats, names.map((name) => ({ name, policies: policiesOf(name) })), c.legacyReset),
    figures: (d) => d,
    Info: CompoundRateLimitInfo,
    seen: new WeakSet(),
    watched: 0,
  };
  return { counted, key, compound };
}
