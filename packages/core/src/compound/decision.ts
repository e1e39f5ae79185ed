import type { Decision, PolicyDecision, PolicyWarning } from "../limiter/types.ts";
import { RESOLVED } from "../resolved.ts";
import type { StoreSource } from "../stores/store.ts";
import type { CompoundCharge, CompoundDecision, DimensionDecision } from "./types.ts";

/*
 * A compound decision from the dimensions' own decisions: the binding dimension's figures on top,
 * as a multi-policy decision takes its binding policy's.
 */

/**
 * One dimension's figures: copied from its decision, whose `policies` (built on first read for a
 * single-policy decision) are read only when asked for.
 */
class DimensionFigures implements DimensionDecision {
  readonly dimension: string;
  readonly key: string;
  readonly allowed: boolean;
  readonly limit: number;
  readonly remaining: number;
  readonly resetAt: number;
  readonly retryAfterMs: number;
  readonly policy: string;
  readonly #decision: Decision;

  constructor(dimension: string, key: string, d: Decision) {
    this.dimension = dimension;
    this.key = key;
    this.allowed = d.allowed;
    this.limit = d.limit;
    this.remaining = d.remaining;
    this.resetAt = d.resetAt;
    this.retryAfterMs = d.allowed ? 0 : d.retryAfterMs;
    this.policy = d.policy;
    this.#decision = d;
  }

  get policies(): readonly PolicyDecision[] {
    return this.#decision.policies;
  }

  get shadow(): readonly PolicyDecision[] {
    return this.#decision.shadow ?? [];
  }

  get warnings(): readonly PolicyWarning[] {
    return this.#decision.warnings ?? [];
  }

  toJSON(): object {
    return { ...this, policies: this.policies };
  }
}

/** One dimension's figures. */
export const dimensionOf = (dimension: string, key: string, d: Decision): DimensionDecision => new DimensionFigures(dimension, key, d);

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
  return new Compound(all, allowed, charge, source, pending);
}

class Compound implements CompoundDecision {
  readonly allowed: boolean;
  readonly limit: number;
  readonly remaining: number;
  readonly resetAt: number;
  readonly retryAfterMs: number;
  readonly policy: string;
  readonly dimension: string;
  readonly dimensions: Readonly<Record<string, DimensionDecision>>;
  readonly charge: CompoundCharge | undefined;
  readonly source: StoreSource;
  readonly pending: Promise<void>;
  readonly #binding: DimensionDecision;

  constructor(
    all: readonly DimensionDecision[],
    allowed: boolean,
    charge: CompoundCharge | undefined,
    source: StoreSource,
    pending: Promise<void>,
  ) {
    let binding = all[0]!;
    const dimensions: Record<string, DimensionDecision> = {};
    for (const d of all) {
      if (allowed ? d.remaining < binding.remaining : !d.allowed && (binding.allowed || d.retryAfterMs > binding.retryAfterMs)) binding = d;
      dimensions[d.dimension] = d;
    }
    this.allowed = allowed;
    this.limit = binding.limit;
    this.remaining = binding.remaining;
    this.resetAt = binding.resetAt;
    this.retryAfterMs = allowed ? 0 : binding.retryAfterMs;
    this.policy = binding.policy;
    this.dimension = binding.dimension;
    this.dimensions = dimensions;
    this.charge = charge;
    this.source = source;
    this.pending = pending;
    this.#binding = binding;
  }

  /** The binding dimension's policies. */
  get policies(): readonly PolicyDecision[] {
    return this.#binding.policies;
  }

  get shadow(): readonly PolicyDecision[] {
    return Object.values(this.dimensions).flatMap((d) => d.shadow);
  }

  get warnings(): readonly PolicyWarning[] {
    return Object.values(this.dimensions).flatMap((d) => d.warnings);
  }

  toJSON(): object {
    return { ...this, policies: this.policies };
  }
}
