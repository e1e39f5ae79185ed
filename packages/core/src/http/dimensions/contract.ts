/*
 * What a rule's `dimensions` option holds, as the options' types see it: a function the HTTP
 * layer calls once per rule to compile it (its signature is `RuleCompiler` in rules.ts), carrying
 * the dimensions' names. The HTTP layer knows nothing else of it, so that an app without
 * `dimensions` bundles none of the compound code (dimensions.ts). Imports nothing.
 */

/** What `dimensions({...})` returns, for a rule's `dimensions` option. */
export interface RuleDimensions<D extends string = string> {
  /** Compiles the rule (called by the HTTP layer, once per rule: see `RuleCompiler`). */
  (...args: never[]): unknown;
  /** The dimensions' names, in order. */
  readonly names: readonly D[];
}
