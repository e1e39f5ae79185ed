import { FloodgateError } from "./errors.ts";
import type { Policy } from "./policies.ts";

/*
 * The safety rules of leased mode that the limiter and the stores share (docs/leases.md has the
 * proofs): which sets may be leased, and the token bucket's reserve.
 */

/** The largest share of a token bucket's capacity its lease reserve may take. */
export const MAX_RESERVE_FRACTION = 0.25;

/** Tokens a token bucket keeps in reserve for leases of `lifeMs`: what it refills in that time, rounded up. */
export function tokenReserve(p: Policy, lifeMs: number): number {
  return Math.ceil((lifeMs * 1000) / Math.round(p.intervalMs * 1000));
}

/** Per policy, the limit a leased set is decided against: a token bucket's capacity less its reserve. */
export function leasedLimits(policies: readonly Policy[], lifeMs: number): number[] {
  return policies.map((p) => (p.kind === "token-bucket" ? p.limit - tokenReserve(p, lifeMs) : p.limit));
}

/**
 * Whether a set is leased (false: it is decided exactly, as a set containing a sliding log, a
 * concurrency policy or a policy with a \`block\` always is). Throws LEASE_UNSUITABLE for a token bucket whose reserve for `lifeMs` exceeds
 * {@link MAX_RESERVE_FRACTION} of its capacity.
 */
export function checkLeasable(where: string, policies: readonly Policy[], lifeMs: number): boolean {
  // A sliding log writes an entry per unit anyway; a concurrency unit is held by one request, not
  // spent; a block starts with a denial in any instance, which a lease elsewhere would not see.
  if (policies.some((p) => p.kind === "sliding-log" || p.kind === "concurrency" || p.blockMs > 0)) return false;
  for (const p of policies) {
    if (p.kind !== "token-bucket") continue;
    const reserve = tokenReserve(p, lifeMs);
    if (reserve > MAX_RESERVE_FRACTION * p.limit) {
      const longest = Math.floor((MAX_RESERVE_FRACTION * p.limit * Math.round(p.intervalMs * 1000)) / 1000);
      throw new FloodgateError(
        "LEASE_UNSUITABLE",
        `${where}: token bucket "${p.name}" cannot be leased for ${lifeMs} ms: it refills ${reserve} of its ${p.limit} tokens in that time, and a leased bucket keeps that much in reserve (at most ${
          MAX_RESERVE_FRACTION * 100
        }% of its capacity is accepted). Use \`leaseMs\` of at most ${longest} ms, a larger capacity, or mode "exact".`,
      );
    }
  }
  return true;
}
