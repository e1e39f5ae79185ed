import { traitsOf } from "../algorithms/algorithm.ts";
import { FloodgateError } from "../errors.ts";
import type { Policy } from "../policy.ts";
import { isThenable, type StoreSource } from "../stores/store.ts";
import { closest } from "../validation.ts";
import { holdsError } from "./checks.ts";
import { NO_POLICIES, NO_WARNINGS } from "./decisions.ts";
import type {
  Charge,
  Decision,
  LimitOptions,
  PolicyDecision,
  PolicyWarning,
  RateLimiter,
  RateLimiterOptions,
  RefundOptions,
  Reservation,
  ReserveOptions,
  SettleOptions,
} from "./types.ts";

/*
 * A limiter with shadow policies or warning thresholds (`shadowPolicy`, `warnAt`): the limiter of
 * the enforced policies as it is, untouched, and beside it the limiter of the shadow policies, in
 * a namespace of its own (`<prefix>shadow:`). The enforced ones decide first; only when they admit
 * are the shadow ones decided as their own set, and charged only if they admit too. A shadow
 * policy therefore never changes what the enforced ones decide, and its count is what enforcing
 * it would keep. Refunds, settlements and resets reach both, each into what it charged, once.
 * A limiter without these options is never wrapped: its hot path is the plain one.
 */

/** Whether options ask for a limiter with shadow policies or warnings. */
export const observes = (o: RateLimiterOptions): boolean => o.shadowPolicy !== undefined || o.warnAt !== undefined;

/** One policy's warning threshold: the fraction, and the units used at which it is crossed. */
interface Threshold {
  readonly fraction: number;
  /** Whole units used at or past which the threshold is crossed (rounded against float error: 0.7 × 10 is 7). */
  readonly used: number;
}

/** Per policy, in order: its threshold, or undefined. */
type Thresholds = readonly (Threshold | undefined)[];

function thresholdsOf(policies: readonly Policy[], warnAt: RateLimiterOptions["warnAt"]): Thresholds | undefined {
  if (warnAt === undefined) return undefined;
  const of = (p: Policy): Threshold | undefined => {
    const fraction = typeof warnAt === "number" ? warnAt : warnAt[p.name];
    return fraction === undefined ? undefined : { fraction, used: Math.ceil(fraction * p.limit - 1e-9) };
  };
  const all = policies.map(of);
  return all.some((t) => t !== undefined) ? all : undefined;
}

/** The warnings of an admission of `cost` units: each policy whose threshold this request crossed. */
function crossed(figures: readonly PolicyDecision[], thresholds: Thresholds | undefined, cost: number, into: PolicyWarning[]): void {
  if (thresholds === undefined || cost === 0) return;
  for (let i = 0; i < figures.length; i++) {
    const t = thresholds[i];
    const p = figures[i]!;
    if (t === undefined || !p.allowed) continue;
    const used = p.limit - p.remaining;
    if (used >= t.used && used - cost < t.used) {
      into.push(Object.freeze({ policy: p.policy, threshold: t.fraction, limit: p.limit, remaining: p.remaining }));
    }
  }
}

/** A decision of the enforced policies with the shadow ones' figures and the warnings crossed. */
class ObservedDecision implements Decision {
  declare readonly allowed: boolean;
  declare readonly limit: number;
  declare readonly remaining: number;
  declare readonly resetAt: number;
  declare readonly retryAfterMs: number;
  declare readonly policy: string;
  declare readonly policies: readonly PolicyDecision[];
  declare readonly shadow: readonly PolicyDecision[];
  declare readonly warnings: readonly PolicyWarning[];
  declare readonly charge: Charge | undefined;
  declare readonly source: StoreSource | "lease";
  #enforced: Decision;
  #shadow: Decision | undefined;

  constructor(enforced: Decision, shadow: Decision | undefined, warnings: readonly PolicyWarning[]) {
    this.allowed = enforced.allowed;
    this.limit = enforced.limit;
    this.remaining = enforced.remaining;
    this.resetAt = enforced.resetAt;
    this.retryAfterMs = enforced.retryAfterMs;
    this.policy = enforced.policy;
    this.policies = enforced.policies;
    this.shadow = shadow?.policies ?? NO_POLICIES;
    this.warnings = warnings;
    // The shadow marks ride along when the shadow set was charged: a refund into the charge reaches both.
    const charge = enforced.charge;
    this.charge = charge !== undefined && shadow?.charge !== undefined
      ? { cost: charge.cost, marks: charge.marks, shadow: shadow.charge.marks }
      : charge;
    this.source = enforced.source;
    this.#enforced = enforced;
    this.#shadow = shadow;
  }

  get pending(): Promise<void> {
    const shadow = this.#shadow;
    return shadow === undefined ? this.#enforced.pending : Promise.all([this.#enforced.pending, shadow.pending]).then(() => {});
  }
}

/** A reservation over both sets: the shadow one made only when the enforced one was admitted (and admitted itself). */
class ObservedReservation implements Reservation {
  readonly decision: Decision;
  #enforced: Reservation;
  #shadow: Reservation | undefined;

  constructor(enforced: Reservation, shadow: Reservation | undefined, decided: Decision | undefined, thresholds: ThresholdsOf) {
    this.#enforced = enforced;
    this.#shadow = shadow;
    this.decision = observe(enforced.decision, decided, enforced.estimate, thresholds);
  }

  get id(): string {
    const shadow = this.#shadow;
    return shadow === undefined ? this.#enforced.id : `${this.#enforced.id}-${shadow.id}`;
  }

  get key(): string {
    return this.#enforced.key;
  }

  get estimate(): number {
    return this.#enforced.estimate;
  }

  settle(actual: number): Promise<boolean> {
    const enforced = this.#enforced.settle(actual);
    const shadow = this.#shadow?.settle(actual);
    return shadow === undefined ? enforced : Promise.all([enforced, shadow]).then(([settled]) => settled);
  }

  cancel(): Promise<boolean> {
    return this.settle(0);
  }

  toJSON(): object {
    return { key: this.key, id: this.id, estimate: this.estimate, decision: this.decision };
  }
}

interface ThresholdsOf {
  readonly enforced: Thresholds | undefined;
  readonly shadow: Thresholds | undefined;
}

/** The decision handed out: the enforced one's figures, the shadow set's, and the warnings either crossed. */
function observe(enforced: Decision, shadow: Decision | undefined, cost: number, thresholds: ThresholdsOf): Decision {
  let warnings: PolicyWarning[] | undefined;
  if (enforced.allowed && (thresholds.enforced !== undefined || thresholds.shadow !== undefined)) {
    warnings = [];
    crossed(enforced.policies, thresholds.enforced, cost, warnings);
    if (shadow !== undefined) crossed(shadow.policies, thresholds.shadow, cost, warnings);
  }
  return new ObservedDecision(enforced, shadow, warnings === undefined || warnings.length === 0 ? NO_WARNINGS : Object.freeze(warnings));
}

const costOf = (options: LimitOptions | undefined): number => options?.cost ?? 1;

/**
 * The limiter of `o` (options checked) with its shadow policies and warnings; `create` makes a
 * plain limiter (createRateLimiter, passed in so that this module does not import it).
 */
export function observedLimiter(o: RateLimiterOptions, create: (options: RateLimiterOptions) => RateLimiter): RateLimiter {
  const { shadowPolicy, warnAt, ...rest } = o;
  const base = create(rest);
  const shadowPolicies = shadowPolicy === undefined ? [] : Array.isArray(shadowPolicy) ? [...shadowPolicy] : [shadowPolicy as Policy];
  const names = [...base.policies, ...shadowPolicies].map((p) => p.name);
  if (new Set(names).size !== names.length) {
    throw new FloodgateError(
      "INVALID_OPTION",
      `createRateLimiter(): invalid option \`shadowPolicy\`: two policies share a name (${
        names.join(", ")
      }); give each policy, enforced or shadow, a distinct \`name\`.`,
    );
  }
  if (typeof warnAt === "object") {
    for (const name of Object.keys(warnAt)) {
      if (names.includes(name)) continue;
      const guess = closest(name, names);
      throw new FloodgateError(
        "INVALID_OPTION",
        `createRateLimiter(): invalid option \`warnAt\`: no policy is named ${JSON.stringify(name)}${
          guess === undefined ? "" : ` (did you mean ${JSON.stringify(guess)}?)`
        }; its keys are policy names: ${names.join(", ")}.`,
      );
    }
  }
  // The same store (behind the same resilience) and clock; the shadow state in its own namespace.
  const shadow = shadowPolicies.length === 0
    ? undefined
    : create({ ...rest, policy: shadowPolicies, store: base.store, prefix: `${base.prefix}shadow:` });
  const thresholds: ThresholdsOf = {
    enforced: thresholdsOf(base.policies, warnAt),
    shadow: thresholdsOf(shadowPolicies, warnAt),
  };
  // A shadow concurrency policy holds a unit that only a reservation releases, as an enforced one does.
  const holding = base.policies.some((p) => traitsOf(p).holdsUnits) ? undefined : shadowPolicies.find((p) => traitsOf(p).holdsUnits);

  /** The shadow set, decided once the enforced one admitted: a shadow failure leaves the enforced decision as it is. */
  const withShadow = (key: string, options: LimitOptions | undefined, enforced: Decision): Decision | Promise<Decision> => {
    const cost = costOf(options);
    if (shadow === undefined || !enforced.allowed) return observe(enforced, undefined, cost, thresholds);
    let decided: Decision | Promise<Decision>;
    try {
      decided = shadow.decide(key, options);
    } catch {
      return observe(enforced, undefined, cost, thresholds);
    }
    if (!isThenable(decided)) return observe(enforced, decided, cost, thresholds);
    return decided.then(
      (s) => observe(enforced, s, cost, thresholds),
      () => observe(enforced, undefined, cost, thresholds),
    );
  };
  const decide = (key: string, options?: LimitOptions): Decision | Promise<Decision> => {
    if (holding !== undefined) throw holdsError(holding);
    const enforced = base.decide(key, options);
    return isThenable(enforced) ? enforced.then((d) => withShadow(key, options, d)) : withShadow(key, options, enforced);
  };
  const both = <T>(call: (limiter: RateLimiter) => Promise<T>): Promise<T> =>
    shadow === undefined ? call(base) : Promise.all([call(base), call(shadow)]).then(([answer]) => answer);

  return Object.freeze({
    policies: base.policies,
    shadowPolicies: shadow?.policies ?? NO_SHADOW,
    warnAt,
    store: base.store,
    prefix: base.prefix,
    mode: base.mode,
    decide,
    limit(key: string, options?: LimitOptions): Promise<Decision> {
      try {
        return Promise.resolve(decide(key, options));
      } catch (error) {
        return Promise.reject(error);
      }
    },
    async peek(key: string): Promise<Decision> {
      const [enforced, s] = await Promise.all([base.peek(key), shadow?.peek(key)]);
      return observe(enforced, s, 0, thresholds);
    },
    refund(key: string, options?: RefundOptions): Promise<void> {
      const charge = options?.charge as (Charge & { shadow?: readonly number[] }) | undefined;
      if (charge === undefined) return both((l) => l.refund(key, options));
      const cost = options!.cost;
      const enforced = base.refund(key, { cost, charge: { cost: charge.cost, marks: charge.marks } });
      if (charge.shadow === undefined || shadow === undefined) return enforced;
      const s = shadow.refund(key, { cost, charge: { cost: charge.cost, marks: charge.shadow } });
      return Promise.all([enforced, s]).then(() => {});
    },
    reset: (key: string) => both((l) => l.reset(key)),
    penalty: (key: string, options?: LimitOptions) => both((l) => l.penalty(key, options)),
    // A block is the enforced policies' (the shadow ones would only report it).
    block: (key: string, duration: Parameters<RateLimiter["block"]>[1]) => base.block(key, duration),
    unblock: (key: string) => base.unblock(key),
    async reserve(key: string, options?: ReserveOptions): Promise<Reservation> {
      const enforced = await base.reserve(key, options);
      if (shadow === undefined || !enforced.decision.allowed) return new ObservedReservation(enforced, undefined, undefined, thresholds);
      let s: Reservation | undefined;
      try {
        s = await shadow.reserve(key, options);
      } catch {
        s = undefined;
      }
      return new ObservedReservation(enforced, s?.decision.allowed ? s : undefined, s?.decision, thresholds);
    },
    settle(key: string, options: SettleOptions): Promise<boolean> {
      const id = typeof options === "object" && options !== null ? options.id : undefined;
      const split = typeof id === "string" && shadow !== undefined ? id.indexOf("-") : -1;
      if (split < 0) return base.settle(key, options);
      const enforced = base.settle(key, { id: id!.slice(0, split), actual: options.actual });
      const s = shadow!.settle(key, { id: id!.slice(split + 1), actual: options.actual });
      return Promise.all([enforced, s]).then(([settled]) => settled);
    },
    flush: () => both((l) => l.flush()),
  });
}

const NO_SHADOW: readonly Policy[] = Object.freeze([]);
