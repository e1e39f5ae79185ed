import type { Decision } from "../limiter/types.ts";
import { RESOLVED } from "../resolved.ts";
import type { StoreSource } from "../stores/store.ts";
import type { CompoundCharge, CompoundDecision, DimensionDecision } from "./types.ts";

/*
 * A compound decision from the dimensions' own decisions: the binding dimension's figures on top,
 * as a multi-policy decision takes its binding policy's.
 */

/** One dimension's figures, as a plain frozen object. */
export function dimensionOf(dimension: string, key: string, d: Decision): DimensionDecision {
  return Object.freeze({
    dimension,
    key,
    allowed: d.allowed,
    limit: d.limit,
    remaining: d.remaining,
    resetAt: d.resetAt,
    retryAfterMs: d.allowed ? 0 : d.retryAfterMs,
    policy: d.policy,
    policies: d.policies,
  });
}

/**
 * The decision over `all` (in the dimensions' order). `allowed`: whether the request was
 * admitted (and, for a charging call, charged in every dimension). The binding dimension: when
 * denied, the denying one with the longest wait (the first on a tie); when allowed, the one with
 * the fewest units remaining.
 */
export function compoundDecision(
  all: readonly DimensionDecision[],
  allowed: boolean,
  charge: CompoundCharge | undefined,
  source: StoreSource,
  pending: Promise<void> = RESOLVED,
): CompoundDecision {
  let binding = all[0]!;
  for (const d of all) {
    if (allowed ? d.remaining < binding.remaining : !d.allowed && (binding.allowed || d.retryAfterMs > binding.retryAfterMs)) binding = d;
  }
  const dimensions: Record<string, DimensionDecision> = {};
  for (const d of all) dimensions[d.dimension] = d;
  return Object.freeze({
    allowed,
    limit: binding.limit,
    remaining: binding.remaining,
    resetAt: binding.resetAt,
    retryAfterMs: allowed ? 0 : binding.retryAfterMs,
    policy: binding.policy,
    policies: binding.policies,
    dimension: binding.dimension,
    dimensions: Object.freeze(dimensions),
    charge,
    source,
    pending,
  });
}
