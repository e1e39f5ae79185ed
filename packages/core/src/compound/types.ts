import type { Decision, PolicyDecision, PolicyWarning, RateLimiter } from "../limiter/types.ts";
import type { StoreSource } from "../stores/store.ts";

/*
 * What applications see of a compound limiter: one decision over several dimensions (a user, an
 * organisation, an IP address, the whole service), each a limiter with its own policies and key.
 */

/** Options of {@link createCompoundLimiter}. */
export interface CompoundLimiterOptions<D extends string = string> {
  /**
   * The dimensions, by name: each a limiter made by `createRateLimiter` (in exact mode), with its
   * own policies and prefix. A request is admitted only when every dimension admits it, and then
   * charged to all of them; a denial charges none. Dimensions on one store that decides several
   * keys in one step (the memory store, one Redis or Upstash database) are decided in that one
   * step; the others one by one, in the order given here (see docs/compound-limits.md).
   */
  dimensions: Readonly<Record<D, RateLimiter>>;
}

/** The key of every dimension for one request, by dimension name. */
export type CompoundKeys<D extends string = string> = Readonly<Record<D, string>>;

/** One dimension's figures within a {@link CompoundDecision}. */
export interface DimensionDecision {
  /** The dimension's name. */
  readonly dimension: string;
  /** Its key for this request. */
  readonly key: string;
  /** Whether this dimension alone admits the request. */
  readonly allowed: boolean;
  /** Its binding policy's limit. */
  readonly limit: number;
  /** Whole units its binding policy has left (after this request when it was charged). */
  readonly remaining: number;
  /** Epoch ms when its binding policy's quota is fully restored. */
  readonly resetAt: number;
  /** 0 when this dimension admits; else ms until it would (`Infinity`: never). */
  readonly retryAfterMs: number;
  /** Name of its binding policy. */
  readonly policy: string;
  /** Every policy of the dimension, in its limiter's order. */
  readonly policies: readonly PolicyDecision[];
  /** Its limiter's shadow policies' figures (`shadowPolicy`), as its own decision has them. */
  readonly shadow: readonly PolicyDecision[];
  /** The `warnAt` thresholds this request crossed in this dimension. */
  readonly warnings: readonly PolicyWarning[];
}

/**
 * The answer to `compound.limit()`: a {@link Decision} whose top-level figures are those of the
 * binding dimension (when denied, the denying dimension with the longest wait; when allowed, the
 * one with the fewest units remaining), and every dimension's own figures.
 */
export interface CompoundDecision<D extends string = string> extends Omit<Decision, "charge" | "source" | "shadow" | "warnings"> {
  /** Every dimension's shadow figures, dimension after dimension. */
  readonly shadow: readonly PolicyDecision[];
  /** Every dimension's crossed `warnAt` thresholds, dimension after dimension. */
  readonly warnings: readonly PolicyWarning[];
  /** Name of the binding dimension: the one that refused, or the closest to refusing. */
  readonly dimension: string;
  /** Every dimension's figures, by name. */
  readonly dimensions: Readonly<Record<D, DimensionDecision>>;
  /** What this admission was charged into, for `compound.refund(charge)`; `undefined` for a denial. */
  readonly charge: CompoundCharge | undefined;
  /** `"store"` for a store's answer; `"cache"` when a deny cache answered the refusal. */
  readonly source: StoreSource;
}

/**
 * What one admitted compound request was charged into, in every dimension. Opaque and plain
 * data (it survives `JSON.stringify`/`JSON.parse`): pass it to `compound.refund()` as it is.
 */
export interface CompoundCharge {
  /** The units charged to every dimension. */
  readonly cost: number;
  /** Per dimension: its key. */
  readonly keys: Readonly<Record<string, string>>;
  /** Per dimension: the marks of its policies (see `Charge.marks`). */
  readonly marks: Readonly<Record<string, readonly number[]>>;
}

/** What `compound.reserve()` gives: the decision and, when admitted, the handle to settle every dimension. */
export interface CompoundReservation<D extends string = string> {
  /** The decision; its `charge` is `undefined` (settle, do not refund). */
  readonly decision: CompoundDecision<D>;
  /** Per dimension, its reservation's id (as `limiter.settle(key, { id })` takes it); empty for a denial. */
  readonly ids: Readonly<Record<string, string>>;
  /** The keys it was reserved under. */
  readonly keys: Readonly<Record<string, string>>;
  /** The units reserved in every dimension. */
  readonly estimate: number;
  /** Settles every dimension at `actual` (see `Reservation.settle`); `true` when this call settled them. */
  settle(actual: number): Promise<boolean>;
  /** Gives everything back in every dimension (settles at 0), releasing concurrency units. */
  cancel(): Promise<boolean>;
}

/** A limiter over several dimensions: see {@link createCompoundLimiter}. */
export interface CompoundLimiter<D extends string = string> {
  /**
   * Decides the request against every dimension, and charges `cost` to all of them when every
   * one admits it; a denial charges none (see docs/compound-limits.md for what a refused
   * request may hold, briefly, on stores without a compound step).
   */
  limit(keys: CompoundKeys<D>, options?: { cost?: number }): Promise<CompoundDecision<D>>;
  /** The decision a request of cost 1 would get now, charging nothing. */
  peek(keys: CompoundKeys<D>): Promise<CompoundDecision<D>>;
  /** Gives back a compound admission's units (default all of them), in every dimension, into what each was charged in. */
  refund(charge: CompoundCharge, options?: { cost?: number }): Promise<void>;
  /**
   * Reserves `estimate` units (default 1) in every dimension, or in none: each dimension's
   * reservation as `limiter.reserve()` makes it (a concurrency policy holds one unit), cancelled
   * again when another dimension refuses. Settle or cancel it when the work ends.
   */
  reserve(keys: CompoundKeys<D>, options?: { estimate?: number; ttl?: number | string }): Promise<CompoundReservation<D>>;
  /** Settles a compound reservation from anywhere, by its keys and ids: `actual: 0` cancels it. */
  settle(keys: CompoundKeys<D>, options: { ids: Readonly<Record<string, string>>; actual: number }): Promise<boolean>;
  /** Resolves once every settlement and refund the dimensions' limiters started has finished. */
  flush(): Promise<void>;
  /** The dimensions, by name, in the order given. */
  readonly dimensions: Readonly<Record<D, RateLimiter>>;
  /** `"store"` when every decision is one compound store step; `"ordered"` when dimensions are charged one by one. */
  readonly path: "store" | "ordered";
}
