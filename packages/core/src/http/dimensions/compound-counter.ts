import type { CompoundCharge, CompoundDecision, CompoundKeys, CompoundLimiter, CompoundReservation } from "../../compound/types.ts";
import { FloodgateError } from "../../errors.ts";
import type { Charge, Decision, RateLimiter, Reservation } from "../../limiter/index.ts";
import { isResilientStore, type ResilientStore, toStoreError } from "../../stores/resilient-store.ts";
import type { RateLimitStore } from "../../stores/store.ts";
import { WHERE } from "../options.ts";
import type { RateLimitRequest } from "../request.ts";
import type { RuleCounter } from "../rules.ts";
import type { DecisionSource, StoreErrorHandling, StoreOutcome } from "../store-errors.ts";

// A rule's dimensions behind the store-error handling: the calls the HTTP layer makes of a rule's
// limiter (see FailoverLimiter), over a compound limiter. A failed store call becomes a compound
// decision of the local fallback (the same dimensions on a memory store), an allow or a deny, as
// `onStoreError` says; what was charged is given back or settled where it was charged.

/** The compound decision as the HTTP layer carries a decision: its figures are the binding dimension's. */
const asDecision = (d: CompoundDecision): Decision => d as unknown as Decision;

/** The calls a rule makes of its limiter, over a compound limiter of its dimensions. */
export class CompoundCounter implements RuleCounter {
  #fallback: CompoundLimiter | undefined;
  readonly #stores: ResilientStore[];
  readonly #storeName: string;

  /**
   * @param keysOf - the request's key of every dimension (the rule's key function named them)
   * @param makeFallback - the same dimensions on a memory store, made on first need
   */
  constructor(
    readonly compound: CompoundLimiter,
    readonly onError: StoreErrorHandling,
    readonly rule: string,
    readonly keysOf: (req: RateLimitRequest) => CompoundKeys,
    readonly makeFallback: () => CompoundLimiter,
    stores: readonly RateLimitStore[],
  ) {
    this.#stores = [...new Set(stores)].filter(isResilientStore);
    this.#storeName = stores[0]!.name;
  }

  /** A rule over dimensions has no one limiter: the handle's calls that need one say so. */
  get limiter(): RateLimiter {
    throw new FloodgateError(
      "INVALID_ARGUMENT",
      `${WHERE}: rule ${JSON.stringify(this.rule)} counts over dimensions (${
        Object.keys(this.compound.dimensions).join(", ")
      }), not in one limiter: address its counters through the compound limiter the rule's dimensions() value gives with \`.limiter()\` (e.g. \`quotas.limiter().dimensions.user.reset(key)\`, \`quotas.refund(info)\`).`,
    );
  }

  /** Ms the longest open circuit of the dimensions' stores stays open at `nowMs` (0: all closed). */
  openForMs(nowMs: number): number {
    let open = 0;
    for (const s of this.#stores) open = Math.max(open, s.openForMs(nowMs));
    return open;
  }

  /** Charges `cost` to every dimension, or to none. Never rejects because of a store. */
  consume(_key: string, cost: number, req: RateLimitRequest): Promise<StoreOutcome> {
    const keys = this.keysOf(req);
    return this.compound.limit(keys, { cost }).then(
      (d): StoreOutcome => ({ decision: asDecision(d), source: d.source, storeError: undefined, atMs: this.onError.clock() }),
      (thrown) => this.#failed(keys, cost, req, thrown, false),
    );
  }

  /** Reserves `estimate` in every dimension, or in none, to settle or cancel when the response ends. */
  reserve(_key: string, estimate: number, req: RateLimitRequest): Promise<StoreOutcome> {
    const keys = this.keysOf(req);
    return this.compound.reserve(keys, { estimate }).then(
      (r) => this.#reserved(r, "store", undefined),
      (thrown) => this.#failed(keys, estimate, req, thrown, true),
    );
  }

  #reserved(r: CompoundReservation, source: DecisionSource, storeError: FloodgateError | undefined): StoreOutcome {
    const allowed = r.decision.allowed;
    return {
      decision: asDecision(r.decision),
      source,
      storeError,
      atMs: this.onError.clock(),
      reservation: allowed ? r as unknown as Reservation : undefined,
    };
  }

  /** Settles a compound reservation at `actual`, or cancels it (`undefined`), in every dimension. Never rejects. */
  finish(_source: DecisionSource, reservation: Reservation, actual: number | undefined): Promise<void> {
    let pending: Promise<boolean>;
    try {
      pending = actual === undefined ? reservation.cancel() : reservation.settle(actual);
    } catch (thrown) {
      pending = Promise.reject(thrown);
    }
    return pending.then(() => {}, (thrown: unknown) => this.onError.report(toStoreError(thrown, this.#storeName)));
  }

  /**
   * Gives back what `consume` charged, in every dimension, into what each was charged in.
   * Skipped while a store's circuit is open; a failure is reported to `onStoreError`. Never rejects.
   */
  refund(source: DecisionSource, _key: string, cost: number, charge: Charge | undefined): Promise<void> | undefined {
    const onStore = source !== "fallback";
    const limiter = onStore ? this.compound : this.#fallback!;
    if (charge === undefined || (onStore && this.openForMs(this.onError.clock()) > 0)) return;
    return limiter.refund(charge as unknown as CompoundCharge, { cost }).then(
      undefined,
      (thrown: unknown) => this.onError.report(toStoreError(thrown, this.#storeName)),
    );
  }

  /** Flushes every dimension's limiter, and the fallback's; a failure goes to `onStoreError`. Never rejects. */
  async flush(): Promise<void> {
    const results = await Promise.allSettled([this.compound.flush(), this.#fallback?.flush()]);
    for (const result of results) {
      if (result.status === "rejected") this.onError.report(toStoreError(result.reason, this.#storeName));
    }
  }

  reset(_key: string): Promise<void> {
    return Promise.reject(this.limiterError());
  }

  /** The error of a handle call that needs one limiter. */
  limiterError(): unknown {
    try {
      return this.limiter;
    } catch (error) {
      return error;
    }
  }

  /** A store call that failed: a bad argument is the caller's (rethrown); anything else, the store-error handling decides. */
  async #failed(keys: CompoundKeys, cost: number, req: RateLimitRequest, thrown: unknown, reserve: boolean): Promise<StoreOutcome> {
    if (thrown instanceof FloodgateError && thrown.code === "INVALID_ARGUMENT") throw thrown;
    const atMs = this.onError.clock();
    const storeError = toStoreError(thrown, this.#storeName);
    const action = this.onError.choose(storeError, req);
    if (action !== "fallback") return { decision: undefined, source: action, storeError, atMs };
    const fallback = this.#fallback ??= this.makeFallback();
    if (reserve) return this.#reserved(await fallback.reserve(keys, { estimate: cost }), "fallback", storeError);
    const decision = await fallback.limit(keys, { cost });
    return { decision: asDecision(decision), source: "fallback", storeError, atMs };
  }
}
