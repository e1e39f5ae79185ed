import { FloodgateError, leasedLimits, type PolicyKind, type PolicySet } from "@floodgate/core/store";
import { ONE_KINDS } from "./sql/consume-one.ts";
import { MAX_POLICIES } from "./sql/expr.ts";

/** A policy set as the procedures take it, computed once per set. */
export interface Prepared {
  readonly count: number;
  /** One kind letter per policy. */
  readonly kinds: string;
  /** Per policy: limit, parameter, block in ms. */
  readonly nums: string;
  /** A single policy of a kind with a consume procedure of its own: its letter, limit, parameter and block ms. */
  readonly one: readonly [code: string, limit: number, param: number, blockMs: number] | undefined;
  /** `nums` with each token bucket's limit less its lease reserve for leases of `lifeMs`. */
  leasedNums(lifeMs: number): string;
}

const CODES: Record<string, string> = {
  "token-bucket": "t",
  "fixed-window": "f",
  "sliding-window": "s",
  "sliding-log": "l",
  concurrency: "c",
};

/** The kinds with a consume procedure of their own (sql/consume-one.ts). */
const ONE_CODES = ONE_KINDS.map((k) => k.code);

/** The kinds the procedures decide. */
export const KINDS = Object.keys(CODES) as PolicyKind[];

/** µs per token of a token bucket, an exact integer (as the algorithm computes it). */
const intervalUs = (intervalMs: number): number => Math.round(intervalMs * 1000);

export function prepare(set: PolicySet): Prepared {
  const policies = set.policies;
  if (policies.length === 0 || policies.length > MAX_POLICIES) {
    throw new FloodgateError("INVALID_ARGUMENT", `mysql store: a set of ${policies.length} policies; expected 1 to ${MAX_POLICIES}.`);
  }
  const params = policies.map((p) => {
    const code = CODES[p.kind];
    if (code === undefined) throw new FloodgateError("INVALID_ARGUMENT", `mysql store: no procedure decides policies of kind "${p.kind}".`);
    return code === "t" ? intervalUs(p.intervalMs) : p.windowMs;
  });
  const numsOf = (limits: readonly number[]): string => policies.map((p, i) => `${limits[i]},${params[i]},${p.blockMs}`).join(",");
  const nums = numsOf(policies.map((p) => p.limit));
  let leased: { lifeMs: number; nums: string } | undefined;
  const code = CODES[policies[0]!.kind]!;
  return {
    count: policies.length,
    one: policies.length === 1 && ONE_CODES.includes(code) ? [code, policies[0]!.limit, params[0]!, policies[0]!.blockMs] : undefined,
    kinds: policies.map((p) => CODES[p.kind]).join(""),
    nums,
    leasedNums(lifeMs) {
      if (leased?.lifeMs !== lifeMs) {
        // A leased token bucket keeps in reserve what it refills in a lease's life (docs/leases.md).
        leased = { lifeMs, nums: numsOf(leasedLimits(policies, lifeMs)) };
      }
      return leased.nums;
    },
  };
}
