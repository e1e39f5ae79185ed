import type { PolicySet, RateLimitStore, StoreResult } from "../stores/store.ts";
import type { Decision, RateLimiter } from "./types.ts";

/*
 * What a limiter keeps to itself but a compound limiter (compound/) needs to decide several of
 * them in one store step: its policy set (the object its store keyed its work on), its clock, and
 * how it reads a store's answer. Kept beside the limiter, not on it: the limiter stays as it is.
 */

export interface LimiterInternals {
  readonly set: PolicySet;
  readonly clock: () => number;
  /** The store as given, under no resilient wrapper. */
  readonly bare: RateLimitStore;
  toDecision(result: StoreResult, cost: number): Decision;
}

const INTERNALS = new WeakMap<RateLimiter, LimiterInternals>();

export function keepInternals(limiter: RateLimiter, internals: LimiterInternals): void {
  INTERNALS.set(limiter, internals);
}

/** A limiter's internals; `undefined` for an object createRateLimiter() did not make. */
export const internalsOf = (limiter: RateLimiter): LimiterInternals | undefined => INTERNALS.get(limiter);
