import type { HttpRateLimitOptions, RuleOptions } from "../options.ts";
import type { CompiledRule, RuleContext } from "../rules.ts";

/*
 * The small interface between the HTTP layer and a rule's `dimensions` (see dimensions.ts): the
 * layer hands what it knows of the rule, the value gives back the compiled rule. Types
 * only, so that an app without `dimensions` bundles none of the compound code.
 */

/** What a compiled rule is besides its limiter: its name, pattern, key, cost and rollout. */
export type RuleBase<Raw> = Omit<CompiledRule<Raw>, "single" | "policyOf" | "limiterFor" | "limiters">;

/**
 * What `dimensions({...})` returns, for a rule's `dimensions` option: a function the HTTP layer
 * (rules.ts) calls once per rule, with what it compiled of the rule (`base`), the rule's options,
 * the middleware's and the rules' context, and which returns the compiled rule; and the
 * dimensions' names.
 */
export interface RuleDimensions<D extends string = string> {
  <Raw>(base: RuleBase<Raw>, rule: RuleOptions<Raw>, options: HttpRateLimitOptions<Raw>, context: RuleContext): CompiledRule<Raw>;
  /** The dimensions' names, in order. */
  readonly names: readonly D[];
}
