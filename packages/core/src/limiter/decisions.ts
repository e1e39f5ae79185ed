import { FIELDS_PER_POLICY, NEVER } from "../algorithms/algorithm.ts";
import type { Policy } from "../policy.ts";
import { sourceOf, type StoreResult, type StoreSource } from "../stores/store.ts";
import { RESOLVED } from "../resolved.ts";
import type { Charge, Decision, PolicyDecision, PolicyWarning } from "./types.ts";

/** The `shadow` of a decision without shadow policies: shared, frozen, so none is made per decision. */
export const NO_POLICIES: readonly PolicyDecision[] = Object.freeze([]);
/** The `warnings` of a decision that crossed no threshold: shared and frozen. */
export const NO_WARNINGS: readonly PolicyWarning[] = Object.freeze([]);

/*
 * Decisions as the limiter hands them out, made from a store's flat figures: one class for a
 * single policy (made the cheapest way, see singleDecision) and one for a set.
 */

/** Where a reservation's decision keeps its reservation (for `pending`). */
const RESERVATION: unique symbol = Symbol("reservation");

/** Where a leased decision keeps the background refresh it started (for `pending`). */
const REFRESH: unique symbol = Symbol("refresh");

/** Sets the `pending` of a leased decision: the lease refresh it started. */
export function setPending(decision: Decision, refresh: Promise<void>): void {
  (decision as unknown as { [REFRESH]?: Promise<void> })[REFRESH] = refresh;
}

/** The `pending` of a decision: its reservation's, its lease refresh, or resolved. */
export function pendingOf(decision: object): Promise<void> {
  const d = decision as { [RESERVATION]?: { pending(): Promise<void> }; [REFRESH]?: Promise<void> };
  return d[RESERVATION]?.pending() ?? d[REFRESH] ?? RESOLVED;
}

/** Links a reservation's decision to its reservation, whose settlement is the decision's `pending`. */
export function linkReservation(decision: Decision, reservation: { pending(): Promise<void> }): void {
  (decision as unknown as Record<symbol, unknown>)[RESERVATION] = reservation;
}

/** The charge of an admitted, charged decision: the marks follow the figures. */
export function chargeOf(result: StoreResult, count: number, cost: number): Charge | undefined {
  const at = 1 + count * FIELDS_PER_POLICY;
  if (result[0] !== 1 || cost === 0 || result.length < at + count) return undefined;
  return { cost, marks: result.slice(at, at + count) };
}

const retryOf = (raw: number): number => (raw === NEVER ? Infinity : raw);

/**
 * A decision over one policy. `decide()` builds it with the constructor, the cheapest way to make
 * an object; `limit()` with {@link singleDecision}, which gives the same object (prototype, own
 * properties in the same order) by `Object.create`. `policies` is built on first read and kept.
 */
export class SingleDecision {
  declare readonly allowed: boolean;
  declare readonly limit: number;
  declare readonly remaining: number;
  declare readonly resetAt: number;
  declare readonly retryAfterMs: number;
  declare readonly policy: string;
  declare readonly charge: Charge | undefined;
  declare readonly source: StoreSource;

  constructor(result: StoreResult, policy: Policy, cost: number) {
    fillSingle(this as Mutable<Omit<Decision, "policies" | "shadow" | "warnings">>, result, policy, cost);
  }

  get policies(): readonly PolicyDecision[] {
    let all = POLICIES.get(this);
    if (!all) {
      POLICIES.set(
        this,
        all = Object.freeze([Object.freeze({
          policy: this.policy,
          allowed: this.allowed,
          limit: this.limit,
          remaining: this.remaining,
          resetAt: this.resetAt,
          retryAfterMs: this.retryAfterMs,
        })]),
      );
    }
    return all;
  }

  get pending(): Promise<void> {
    return pendingOf(this);
  }

  /** None: a limiter with shadow policies or warnings makes its own decisions (limiter/observed.ts). */
  get shadow(): readonly PolicyDecision[] {
    return NO_POLICIES;
  }

  get warnings(): readonly PolicyWarning[] {
    return NO_WARNINGS;
  }

  toJSON(): object {
    return { ...this, policies: this.policies };
  }
}

/** A single-policy decision's `policies`, once read: kept outside it, so that it has no other own property. */
const POLICIES = new WeakMap<SingleDecision, readonly PolicyDecision[]>();

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

/** Read once: `Object.create` then gets the same prototype object every call, with no property read. */
const SINGLE_DECISION: object = SingleDecision.prototype;

/**
 * A decision over one policy: the store's numbers, on an object made by `Object.create` of
 * {@link SingleDecision}'s prototype, not by `new SingleDecision()`. When `limit()` resolves its
 * promise with it, the optimizing compiler (Node 20) skips the look-up of a `then` method only
 * for an object whose shape it knows from where it was made: so for this one, not for an
 * instance a constructor built. That look-up walks the prototype chain on every `limit()`
 * (bench/README.md has what it costs).
 * Properties, their order, the prototype and `toJSON` are those of the class instance.
 */
export function singleDecision(result: StoreResult, policy: Policy, cost: number): Decision {
  return fillSingle(
    Object.create(SINGLE_DECISION) as Mutable<Omit<Decision, "policies" | "shadow" | "warnings">>,
    result,
    policy,
    cost,
  ) as Decision;
}

/** Writes a single-policy decision's own properties, in the one order both ways of making it share. */
function fillSingle(
  d: Mutable<Omit<Decision, "policies" | "shadow" | "warnings">>,
  result: StoreResult,
  policy: Policy,
  cost: number,
): Mutable<Omit<Decision, "policies" | "shadow" | "warnings">> {
  d.allowed = result[0] === 1;
  d.limit = policy.limit;
  d.remaining = result[2]!;
  d.resetAt = result[3]!;
  d.retryAfterMs = d.allowed ? 0 : retryOf(result[4]!);
  d.policy = policy.name;
  // A charged admission's mark follows the figures (see chargeOf). Plain data, not frozen:
  // freezing the charge and its marks on every decision costs more than the decision itself.
  d.charge = d.allowed && cost > 0 && result.length > 5 ? { cost, marks: [result[5]!] } : undefined;
  d.source = sourceOf(result);
  return d;
}

export class MultiDecision implements Decision {
  declare readonly allowed: boolean;
  declare readonly limit: number;
  declare readonly remaining: number;
  declare readonly resetAt: number;
  declare readonly retryAfterMs: number;
  declare readonly policy: string;
  declare readonly policies: readonly PolicyDecision[];
  declare readonly charge: Charge | undefined;
  declare readonly source: StoreSource;

  constructor(result: StoreResult, policies: readonly Policy[], cost: number) {
    this.allowed = result[0] === 1;
    const all: PolicyDecision[] = [];
    let binding = 0;
    for (let p = 0; p < policies.length; p++) {
      const i = 1 + p * FIELDS_PER_POLICY;
      const admitted = result[i] === 1;
      all.push(Object.freeze({
        policy: policies[p]!.name,
        allowed: admitted,
        limit: policies[p]!.limit,
        remaining: result[i + 1]!,
        resetAt: result[i + 2]!,
        retryAfterMs: admitted ? 0 : retryOf(result[i + 3]!),
      }));
      const current = all[binding]!;
      const candidate = all[p]!;
      if (this.allowed) {
        if (candidate.remaining < current.remaining) binding = p;
      } else if (!candidate.allowed && (current.allowed || candidate.retryAfterMs > current.retryAfterMs)) {
        binding = p;
      }
    }
    const chosen = all[binding]!;
    this.limit = chosen.limit;
    this.remaining = chosen.remaining;
    this.resetAt = chosen.resetAt;
    this.retryAfterMs = this.allowed ? 0 : chosen.retryAfterMs;
    this.policy = chosen.policy;
    this.policies = Object.freeze(all);
    this.charge = chargeOf(result, policies.length, cost);
    this.source = sourceOf(result);
  }

  get pending(): Promise<void> {
    return pendingOf(this);
  }

  /** None: a limiter with shadow policies or warnings makes its own decisions (limiter/observed.ts). */
  get shadow(): readonly PolicyDecision[] {
    return NO_POLICIES;
  }

  get warnings(): readonly PolicyWarning[] {
    return NO_WARNINGS;
  }
}
