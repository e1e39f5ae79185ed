import { describeValue, FloodgateError } from "../errors.ts";
import type { Decision, RateLimiter } from "../limiter/index.ts";
import type { Policy } from "../policy.ts";
import { fitKey } from "./keys.ts";
import { WHERE } from "./options.ts";
import type { CompiledRule, RuleLimiter, RuleSet } from "./rules.ts";

// The handle on a middleware's counters (reset, peek, penalty, limiterFor, flush), addressing
// exactly the namespace and store the middleware counts each rule in.

/** Which of a middleware's limiters a {@link RateLimitHandle} call addresses. */
export interface HandleOptions {
  /** The rule, by its pattern exactly as written in `rules` (e.g. `"POST /login"`); default `"default"`. */
  rule?: string;
  /**
   * For a rule whose `policy` is a function: the policy set (as the function returns it) whose
   * counters to address. Without it, `reset` resets the key in every set the rule has counted
   * in so far; `peek`, `penalty` and `limiterFor` need it.
   */
  policy?: Policy | readonly Policy[];
}

/**
 * The handle on a middleware's counters that `rateLimit(...)` (every adapter) and
 * `withRateLimit(...)` return alongside the middleware: each call addresses exactly the namespace
 * and store the middleware counts the rule in. Keys are the ones the middleware counts: what
 * the `key` function returns (the client address, grouped, without one).
 *
 * @example
 * const limit = rateLimit({ rules: { "POST /login": { policy, key: userKey } }, skipSuccessfulRequests: true });
 * // after a successful login:
 * await limit.reset(`user:${name}`, { rule: "POST /login" });
 */
export interface RateLimitHandle {
  /** Clears `key`'s counters (and block) under the rule. */
  reset(key: string, options?: HandleOptions): Promise<void>;
  /** The decision a request of cost 1 would get now under the rule, charging nothing. */
  peek(key: string, options?: HandleOptions): Promise<Decision>;
  /** Charges `cost` (default 1) to `key` under the rule whatever it admits, saturating (see `RateLimiter.penalty`). */
  penalty(key: string, options?: HandleOptions & { cost?: number }): Promise<void>;
  /**
   * The limiter the middleware counts the rule (default `"default"`) in: for `block`, `unblock`,
   * `refund` and the rest. For a rule whose `policy` is a function, give the policy set.
   */
  limiterFor(rule?: string, policy?: Policy | readonly Policy[]): RateLimiter;
  /**
   * Resolves once everything the middleware has started after responses has finished (the
   * settlements of costs settled later, the releases of concurrency units, the refunds of
   * `skipSuccessfulRequests` and `skipFailedRequests`, the promises hooks returned), and every
   * limiter its rules use (those of a `policy` function's sets too) has flushed: in leased
   * mode, its leases given back. For a SIGTERM handler (close the server first, so that no
   * response is still under way) and for tests. Never rejects: a store failure meanwhile goes to
   * `onStoreError` (or the logger), as it would without `flush()`.
   */
  flush(): Promise<void>;
}

/** Gives `target` (a middleware function) the handle's methods, bound to `limiter`'s. */
export function withHandle<T extends object>(target: T, limiter: RateLimitHandle): T & RateLimitHandle {
  return Object.assign(target, {
    reset: limiter.reset,
    peek: limiter.peek,
    penalty: limiter.penalty,
    limiterFor: limiter.limiterFor,
    flush: limiter.flush,
  });
}

/**
 * The handle on `rules`' counters; `started` is what the middleware started after its decisions
 * and has not seen finish (none of it rejects), for `flush()`.
 */
export function createHandle<Raw>(rules: RuleSet<Raw>, started: Set<Promise<unknown>>): RateLimitHandle {
  /** The rule a handle call names, or an INVALID_ARGUMENT error listing the rules. */
  const ruleNamed = (name: string | undefined): CompiledRule<Raw> => {
    const rule = rules.byName(name ?? "default");
    if (rule !== undefined) return rule;
    throw new FloodgateError(
      "INVALID_ARGUMENT",
      `${WHERE}: no rule ${describeValue(name ?? "default")}${
        name === undefined ? " (no `rule` was given)" : ""
      }; this middleware's rules are ${rules.names.map((n) => JSON.stringify(n)).join(", ")}.`,
    );
  };
  /** The one limiter a handle call addresses. */
  const limiterIn = (rule: CompiledRule<Raw>, policy: Policy | readonly Policy[] | undefined): RuleLimiter => {
    if (rule.single !== undefined) return rule.single;
    if (policy !== undefined) return rule.limiterFor(policy);
    throw new FloodgateError(
      "INVALID_ARGUMENT",
      `${WHERE}: the policy of rule ${
        JSON.stringify(rule.name)
      } is a function of the request, so its counters are per policy set: pass \`policy\` (the set the function returns) to say which.`,
    );
  };
  const limiterOf = (options: HandleOptions | undefined): RateLimiter =>
    limiterIn(ruleNamed(options?.rule), options?.policy).limiter.limiter;
  return {
    async reset(key, options) {
      const rule = ruleNamed(options?.rule);
      const targets = rule.single !== undefined || options?.policy !== undefined
        ? [limiterIn(rule, options?.policy)]
        : [...rule.limiters()];
      for (const target of targets) await target.limiter.reset(fitKey(key));
    },
    // async: a bad rule or a missing policy rejects, as a store failure does.
    peek: async (key, options): Promise<Decision> => limiterOf(options).peek(fitKey(key)),
    penalty: async (key, options) =>
      limiterOf(options).penalty(fitKey(key), options?.cost === undefined ? undefined : { cost: options.cost }),
    limiterFor: (rule, policy) => limiterOf({ rule, policy }),
    async flush() {
      while (started.size > 0) await Promise.allSettled([...started]);
      const flushes: Promise<void>[] = [];
      for (const name of rules.names) for (const made of rules.byName(name)!.limiters()) flushes.push(made.limiter.flush());
      await Promise.all(flushes);
    },
  };
}
