/**
 * Random policy sets for the Redis trace suites (equivalence.test.ts, multi-policy-audit.test.ts).
 * Times, windows and token intervals are whole multiples of `GRAIN_MS` (one second), so a key's
 * remaining TTL in injected time is 0 or at least a second: the real time a trace takes never
 * expires a key the memory store still counts.
 */
import fc from "fast-check";
import { type Policy, tokenBucket } from "../../packages/core/src/index.ts";
import { example, KINDS, type RateKind } from "../support/kinds.ts";

export const GRAIN_MS = 1000;

export interface PolicyRanges {
  /** Largest limit (a token bucket's capacity); the smallest is 1. */
  maxLimit: number;
  /** Windows, in grains. */
  windows: readonly number[];
  /** Token-bucket refill rates, tokens per second (each interval a whole number of grains). */
  rates: readonly number[];
  /** How many policies a set holds. */
  minPolicies: number;
  maxPolicies: number;
  /** The kinds to draw from (default every kind that counts units; a store may decide fewer). */
  kinds?: readonly RateKind[];
}

/** Sets of policies of any kinds (repeated kinds included), named `p0`, `p1`... */
export function policySets(r: PolicyRanges): fc.Arbitrary<Policy[]> {
  const limit = fc.integer({ min: 1, max: r.maxLimit });
  const kinds = r.kinds ?? KINDS;
  const policy: fc.Arbitrary<Policy> = fc.oneof(
    // Every registered kind, `limit` per window; the window is `limit` × n grains, so that a
    // bucket refilled over it earns one token every n grains.
    fc.record({ kind: fc.constantFrom(...kinds), limit, n: fc.constantFrom(...r.windows) })
      .map(({ kind, limit, n }) => example(kind, limit, limit * n * GRAIN_MS)),
    fc.record({ kind: fc.constantFrom(...kinds), limit, window: fc.constantFrom(...r.windows) })
      .filter(({ kind }) => kind !== "token-bucket")
      .map(({ kind, limit, window }) => example(kind, limit, window * GRAIN_MS)),
    fc.record({ limit, rate: fc.constantFrom(...r.rates) }).map(({ limit, rate }) => tokenBucket({ capacity: limit, refillRate: rate })),
  );
  return fc.array(policy, { minLength: r.minPolicies, maxLength: r.maxPolicies })
    .map((ps) => ps.map((p, i) => Object.freeze({ ...p, name: `p${i}` })));
}
