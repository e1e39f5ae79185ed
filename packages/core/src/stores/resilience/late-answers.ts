import { FIELDS_PER_POLICY } from "../../algorithms/algorithm.ts";
import type { LeaseRequest, PolicySet, RateLimitStore, StoreResult } from "../store.ts";
import { tell } from "./options.ts";

/**
 * What the resilient store (../resilient-store.ts) does with the answer of a call it abandoned at
 * its deadline: the request got the store-failure answer, so whatever the store charged for it
 * goes back, once, into what it was charged in; all of it counted.
 */
export class LateAnswers {
  charges = 0;
  refunds = 0;
  refundsFailed = 0;
  reservations = 0;

  /** `told`: the `lateCharge` store event, told of each late charge once it is given back (true) or cannot be (false). */
  constructor(readonly inner: RateLimitStore, readonly told?: (store: string, returned: boolean) => void) {}

  done(returned: boolean): void {
    const told = this.told;
    if (told !== undefined) tell(() => told(this.inner.name, returned));
  }

  /**
   * The late answer of a consume. When the store admitted it, its units are charged to a request
   * that got the failure answer: they go back once, into what they were charged in (the marks that
   * follow the figures), never by key and cost alone, which could land in a later window on
   * someone else's units. A store that returns no marks keeps them (counted).
   */
  charge(set: PolicySet, key: string, cost: number, nowMs: number, result: StoreResult): void {
    if (result[0] !== 1) return;
    this.charges++;
    // The marks follow the figures; a store that returns none keeps the charge.
    const at = 1 + set.policies.length * FIELDS_PER_POLICY;
    if (result.length <= at) {
      this.refundsFailed++;
      this.done(false);
      return;
    }
    const marks = result.slice(at);
    // A refund that throws or rejects leaves the charge in place: it stays counted, not refunded.
    new Promise<void>((resolve) => resolve(this.inner.refund(set, key, cost, nowMs, marks))).then(
      () => {
        this.refunds++;
        this.done(true);
      },
      () => {
        this.refundsFailed++;
        this.done(false);
      },
    );
  }

  /**
   * The late answer of a reservation: when admitted, it is cancelled once, by its id (settled at
   * 0: everything back, concurrency units released). A settle is idempotent, so a client's own
   * retry of it cannot count twice.
   */
  reservation(set: PolicySet, key: string, id: string, nowMs: number, result: StoreResult): void {
    if (result[0] !== 1) return;
    this.reservations++;
    new Promise<boolean>((resolve) => resolve(this.inner.settle!(set, key, id, 0, nowMs))).then(
      () => {
        this.refunds++;
        this.done(true);
      },
      () => this.done(false),
    );
  }

  /**
   * The late answer of a lease call: the request's units go back as a late charge's do, and a
   * granted lease is returned whole (once: by its id), since no one holds it.
   */
  lease(set: PolicySet, key: string, request: LeaseRequest, nowMs: number, result: StoreResult): void {
    const count = set.policies.length;
    const at = 1 + count * FIELDS_PER_POLICY;
    if (request.cost > 0) this.charge(set, key, request.cost, nowMs, result.slice(0, at + count));
    const granted = result[at + count] ?? 0;
    if (result[0] !== 1 || granted <= 0) return;
    const back: LeaseRequest = {
      cost: 0,
      want: 0,
      lifeMs: 0,
      minLifeMs: 0,
      id: `${request.id}-r`,
      returns: [{ id: request.id, unspent: granted }],
    };
    new Promise<unknown>((resolve) => resolve(this.inner.lease!(set, key, back, nowMs))).then(() => undefined, () => undefined);
  }
}
