import type { CompoundLimiter } from "../../compound/types.ts";
import type { RateLimitInfo } from "../info.ts";

/*
 * What a rule's `dimensions` option holds, as the options' types see it: a function the HTTP
 * layer calls once per rule to compile it (its signature is `RuleCompiler` in rules.ts), carrying
 * the dimensions' names and the rule's compound limiter. The HTTP layer knows nothing else of it,
 * so that an app without `dimensions` bundles none of the compound code (dimensions.ts).
 */

/** What `dimensions({...})` returns, for a rule's `dimensions` option. */
export interface RuleDimensions<D extends string = string> {
  /** Compiles the rule (called by the HTTP layer, once per rule: see `RuleCompiler`). */
  (...args: never[]): unknown;
  /** The dimensions' names, in order. */
  readonly names: readonly D[];
  /**
   * The compound limiter the rule made with this value counts in (its dimensions' limiters on the
   * rule's namespaces and stores): to refund a request's `info.charge` later, to peek, or to
   * reset a key of one dimension (`limiter().dimensions.user.reset(key)`). Throws
   * INVALID_ARGUMENT unless exactly one rule was made with this value.
   */
  limiter(): CompoundLimiter<D>;
  /**
   * Gives back what the request `info` describes was charged (default all of it), in every
   * dimension, into what each was charged in: a late refund, as `limiter().refund(charge)`.
   * Nothing for a request that was not charged. Throws as `limiter()` does.
   */
  refund(info: RateLimitInfo, options?: { cost?: number }): Promise<void>;
}
