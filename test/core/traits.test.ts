/**
 * What a kind can do is declared once, on its algorithm (and so on its registry definition), and
 * everything else reads the declaration: a kind made up here, with traits no registered kind has,
 * flows through the lease rules, the limiter and the lease script's dispatch without any list
 * being edited.
 */
import { describe, expect, it } from "vitest";
import { createRateLimiter, fixedWindow, FloodgateError, type Policy } from "../../packages/core/src/index.ts";
import { ALGORITHM, algorithmOf, type AlgorithmTraits, traitsOf } from "../../packages/core/src/algorithms/algorithm.ts";
import { ALGORITHMS, POLICY_KINDS } from "../../packages/core/src/algorithms/registry.ts";
import { checkLeasable, leasedLimits, leaseHorizonMs } from "../../packages/core/src/leases/rules.ts";
import { leaseLuaScript } from "../../packages/core/src/stores/redis/lease-lua.ts";
import { example } from "../support/kinds.ts";

/** A fixed window of `limit` per `windowMs` whose algorithm declares `traits` instead of its own. */
function fakeKind(traits: AlgorithmTraits, limit = 100, windowMs = 60_000): Policy {
  const base = fixedWindow({ limit, window: windowMs, name: "fake" });
  return Object.create(base, { [ALGORITHM]: { value: { ...algorithmOf(base), traits } } }) as Policy;
}

describe("kinds' traits", () => {
  it("every registered kind's definition declares the very traits its policies carry", () => {
    for (const kind of POLICY_KINDS) {
      expect(traitsOf(example(kind, 10, 60_000)), kind).toBe(ALGORITHMS[kind].traits);
    }
  });

  it("leased mode: a kind that declares no lease keeps its set exact; a declared reserve lowers the leased limit", () => {
    const never = fakeKind({ lease: undefined, holdsUnits: false, cachesDenials: true });
    expect(checkLeasable("t", [never], 5000)).toBe(false);
    const reserving = fakeKind({ lease: { reserve: () => 7, windowed: false }, holdsUnits: false, cachesDenials: true });
    expect(checkLeasable("t", [reserving], 5000)).toBe(true);
    expect(leasedLimits([reserving], 5000)).toEqual([93]);
    // Not windowed: its window does not cut a lease's life.
    expect(leaseHorizonMs([reserving], 5000)).toBe(5000);
    const windowed = fakeKind({ lease: { reserve: () => 0, windowed: true }, holdsUnits: false, cachesDenials: true }, 100, 2000);
    expect(leaseHorizonMs([windowed], 5000)).toBe(2000);
  });

  it("leased mode: a reserve over a quarter of the limit is refused with LEASE_UNSUITABLE, naming the longest life that fits", () => {
    const greedy = fakeKind({
      lease: { reserve: (_p, lifeMs) => Math.ceil(lifeMs / 100), windowed: false },
      holdsUnits: false,
      cachesDenials: true,
    });
    let error: unknown;
    try {
      checkLeasable("t", [greedy], 5000);
    } catch (e) {
      error = e;
    }
    expect((error as FloodgateError).code).toBe("LEASE_UNSUITABLE");
    // 25 of 100 units fit: a life of at most 2500 ms.
    expect((error as Error).message).toMatch(/at most 2500 ms/);
  });

  it("a kind that holds units is decided through reserve(), never limit()", async () => {
    const holding = fakeKind({ lease: undefined, holdsUnits: true, cachesDenials: false });
    const limiter = createRateLimiter({ policy: holding });
    await expect(limiter.limit("k")).rejects.toBeInstanceOf(FloodgateError);
    const reservation = await limiter.reserve("k");
    expect(reservation.decision.allowed).toBe(true);
    expect(await reservation.cancel()).toBe(true);
  });

  it("the lease script dispatches on exactly the kinds that declare a lease", () => {
    const source = leaseLuaScript().source;
    for (const kind of POLICY_KINDS) {
      const branch = `kind == "${ALGORITHMS[kind].lua.code}" then`;
      expect(source.includes(branch), kind).toBe(ALGORITHMS[kind].traits.lease !== undefined);
    }
  });
});
