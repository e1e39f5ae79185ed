/**
 * The kinds of policy, from the registry, for tests that run once per kind: adding a kind to
 * packages/core/src/algorithms/registry.ts puts it through every such test.
 */
import { ALGORITHMS, POLICY_KINDS, type PolicyKind } from "../../packages/core/src/algorithms/registry.ts";
import * as core from "../../packages/core/src/index.ts";
import type { Policy } from "../../packages/core/src/index.ts";

/** Every registered kind, in the registry's order. */
export const KINDS: readonly PolicyKind[] = POLICY_KINDS;

/**
 * A policy of `kind` admitting `limit` per `windowMs` (a bucket of `limit` refilled over
 * `windowMs`), built with the factory the package exports for it.
 */
export function example(kind: PolicyKind, limit: number, windowMs: number, name?: string, extra?: object): Policy {
  const definition = ALGORITHMS[kind];
  const factory = (core as unknown as Record<string, unknown>)[definition.factoryName];
  if (typeof factory !== "function") throw new Error(`${kind}: @floodgate/core exports no ${definition.factoryName}()`);
  return (factory as (options: object) => Policy)({ ...definition.exampleOptions(limit, windowMs, name), ...extra });
}

/** The longest a key's state matters after a charge (the most its TTL needs to be). */
export function retentionMs(policy: Policy): number {
  return ALGORITHMS[policy.kind].retentionMs(policy);
}
