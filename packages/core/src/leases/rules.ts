import { traitsOf } from "../algorithms/algorithm.ts";
import { FloodgateError } from "../errors.ts";
import type { Policy } from "../policy.ts";

/*
 * The safety rules of leased mode that the limiter and the stores share (docs/leases.md has the
 * proofs): which sets may be leased, and what each policy keeps in reserve. Both come from the
 * kinds' declared traits, never from their names.
 */

/** The largest share of a policy's limit its lease reserve may take. */
export const MAX_RESERVE_FRACTION = 0.25;

/** Units `p` keeps in reserve for leases of `lifeMs` (0 for a kind that keeps none or is never leased). */
export const leaseReserve = (p: Policy, lifeMs: number): number => traitsOf(p).lease?.reserve(p, lifeMs) ?? 0;

/** Per policy, the limit a leased set is decided against: the policy's limit less its reserve. */
export function leasedLimits(policies: readonly Policy[], lifeMs: number): number[] {
  return policies.map((p) => p.limit - leaseReserve(p, lifeMs));
}

/** The longest a lease of this set can live: `lifeMs`, or the shortest window of its policies. */
export function leaseHorizonMs(policies: readonly Policy[], lifeMs: number): number {
  let horizon = lifeMs;
  for (const p of policies) {
    if (traitsOf(p).lease?.windowed === true && p.windowMs < horizon) horizon = p.windowMs;
  }
  return horizon;
}

/**
 * Whether a set is leased (false: it is decided exactly, as a set with a kind that declares no
 * lease, or with a policy that has a `block`, always is). Throws LEASE_UNSUITABLE for a policy
 * whose reserve for `lifeMs` exceeds {@link MAX_RESERVE_FRACTION} of its limit.
 */
export function checkLeasable(where: string, policies: readonly Policy[], lifeMs: number): boolean {
  // A block starts with a denial in any instance, which a lease elsewhere would not see.
  if (policies.some((p) => traitsOf(p).lease === undefined || p.blockMs > 0)) return false;
  for (const p of policies) {
    const reserve = leaseReserve(p, lifeMs);
    if (reserve <= MAX_RESERVE_FRACTION * p.limit) continue;
    // The reserve grows with the life: the longest whole-ms life whose reserve fits.
    let longest = 0;
    for (let hi = lifeMs; longest < hi;) {
      const mid = Math.ceil((longest + hi) / 2);
      if (leaseReserve(p, mid) <= MAX_RESERVE_FRACTION * p.limit) longest = mid;
      else hi = mid - 1;
    }
    throw new FloodgateError(
      "LEASE_UNSUITABLE",
      `${where}: ${
        p.kind.replace(/-/g, " ")
      } "${p.name}" cannot be leased for ${lifeMs} ms: it refills ${reserve} of its ${p.limit} units in that time, and a leased policy keeps that much in reserve (at most ${
        MAX_RESERVE_FRACTION * 100
      }% of its limit is accepted). Use \`leaseMs\` of at most ${longest} ms, a larger limit, or mode "exact".`,
    );
  }
  return true;
}
