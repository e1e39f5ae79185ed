/*
 * Reserve now, settle later: the primitive under costs known only after the work (an LLM call's
 * tokens), in-flight limits and the after-response work of the HTTP layer.
 *
 *   const r = await limiter.reserve(key, { estimate: 500, ttl?: "10m" });  // Promise<Reservation>
 *   r.decision   // the Decision, as limit() gives it (charge undefined: settle, never refund)
 *   r.id         // string naming the ledger record: unique, JSON-safe; "" for a denial
 *   await r.settle(actual)   // Promise<boolean>: true when this call settled it
 *   await r.cancel()         // settle(0): everything back, concurrency units released
 *   await limiter.settle(key, { id, actual })  // the same from anywhere (another process)
 *   await limiter.flush()    // every settlement this limiter started has finished
 *   decision.pending         // Promise<void>, never rejects: what the limiter does after the decision
 *
 * A reservation is one atomic store step over every policy: all charge the estimate and a ledger
 * record {cost, marks, expiry} is written, or nothing is (a denial). Settling reads and deletes
 * that record and applies actual − estimate into the marks (given back, or charged past the
 * limit), in one store step: a second settle or cancel finds no record and changes nothing.
 * A reservation never settled expires after its ttl and keeps its estimate charged.
 */
import type { HeldReservation, StoreResult } from "../stores/store.ts";
import { checkActual } from "./checks.ts";
import { RESOLVED } from "../resolved.ts";
import type { Decision, Reservation } from "./types.ts";

/**
 * What a reservation calls in its limiter: `decide` makes its decision from the store's answer
 * (linking it to the reservation, for its `pending`); `settle` settles it, answering as the store
 * does (a synchronous store's answer as it is). `ref` is the id, or the record a store holds in process (see `RateLimitStore.reserveHeld`).
 */
export interface ReservationVia {
  decide(result: StoreResult, reservation: ReservationImpl): Decision;
  settle(key: string, ref: string | HeldReservation, actual: number): boolean | Promise<boolean>;
}

const NOTHING = /* @__PURE__ */ Promise.resolve(false);
const SETTLED = /* @__PURE__ */ Promise.resolve(true);
const noop = (): void => undefined;

/**
 * A reservation: an admitted one settles once through the limiter; a denial's handle does
 * nothing. The decision and the id are made only when read (most callers read neither): reserving
 * and settling through the memory store then cost no more than two `limit()` calls
 * (bench/reservations.ts).
 */
export class ReservationImpl implements Reservation {
  declare readonly key: string;
  declare readonly estimate: number;
  /** The id; or the record a store holds in process, whose id is made when read; `""` for a denial. */
  #ref: string | HeldReservation;
  #via: ReservationVia;
  /** The store's answer, made into the decision when that is first read. */
  #result: StoreResult;
  #decision: Decision | undefined;
  /** The settle or cancel under way or done; `undefined` before one, and again after one failed (a retry is safe). */
  #done: Promise<boolean> | undefined;
  /** What `pending()` handed out before any settle started. */
  #waiter: { promise: Promise<void>; resolve: () => void } | undefined;

  constructor(result: StoreResult, via: ReservationVia, ref: string | HeldReservation, key: string, estimate: number) {
    this.key = key;
    this.estimate = estimate;
    this.#ref = ref;
    this.#via = via;
    this.#result = result;
  }

  settle(actual: number): Promise<boolean> {
    try {
      checkActual(actual);
    } catch (error) {
      return Promise.reject(error);
    }
    const ref = this.#ref;
    if (ref === "") return NOTHING;
    if (this.#done !== undefined) return this.#done.then(() => false);
    let answer: boolean | Promise<boolean>;
    try {
      answer = this.#via.settle(this.key, ref, actual);
    } catch (error) {
      return Promise.reject(error);
    }
    const waiter = this.#waiter;
    this.#waiter = undefined;
    if (typeof answer === "boolean") {
      // A synchronous store (memory): settled already, nothing to wait for.
      const done = this.#done = answer ? SETTLED : NOTHING;
      waiter?.resolve();
      return done;
    }
    // Once the store answered, this handle is spent; a failed call may be retried.
    const done = answer;
    this.#done = done;
    done.then(undefined, () => {
      if (this.#done === done) this.#done = undefined;
    });
    if (waiter !== undefined) done.then(waiter.resolve, waiter.resolve);
    return done;
  }

  /** Resolves once a settle or cancel of this reservation has finished (at once for a denial); never rejects. */
  pending(): Promise<void> {
    if (this.#ref === "") return RESOLVED;
    if (this.#done !== undefined) return this.#done.then(noop, noop);
    if (this.#waiter === undefined) {
      let resolve!: () => void;
      const promise = new Promise<void>((r) => {
        resolve = r;
      });
      this.#waiter = { promise, resolve };
    }
    return this.#waiter.promise;
  }

  get decision(): Decision {
    return this.#decision ??= this.#via.decide(this.#result, this);
  }

  get id(): string {
    const ref = this.#ref;
    return typeof ref === "string" ? ref : ref.id;
  }

  cancel(): Promise<boolean> {
    return this.settle(0);
  }

  toJSON(): object {
    return { key: this.key, id: this.id, estimate: this.estimate, decision: this.decision };
  }
}
