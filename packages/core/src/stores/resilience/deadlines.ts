// The deadlines of the resilient store's calls in flight (../resilient-store.ts), on one timer.

import { preciseNow } from "./options.ts";

/** A call with a deadline: an entry of {@link Deadlines}. */
export interface Timed {
  /** When it is due, on {@link preciseNow}'s clock (ms). */
  deadline: number;
  /** Its neighbours while it is in the list (the older one, the newer one). */
  older: Timed | undefined;
  newer: Timed | undefined;
  /** Whether it is in the list. */
  listed: boolean;
  /** Its deadline has passed while it was in the list; it is out of the list now. */
  expire(): void;
}

interface NodeTimer {
  ref(): unknown;
  unref(): unknown;
}

/**
 * The calls in flight of one resilient store, oldest first, and one timer for the oldest's
 * deadline. Every call of a store has the same timeout, so deadlines come in the order the calls
 * were made: a call is appended, taken out in O(1) when it settles, and when the timer fires,
 * every call due by then expires and the timer is set again for the oldest left. A timer per call
 * cost more than the rest of the wrapper together (one Node timer made, listed and cleared on
 * every call).
 *
 * The timer is set when a call finds none, and set again only as it fires: a call that settles
 * leaves it as it is. On Node it holds the process open only while a call is in flight, as a
 * timer of that call would (`ref`/`unref`); where timers have no `ref` it fires as set, harmlessly.
 */
export class Deadlines {
  #oldest: Timed | undefined = undefined;
  #newest: Timed | undefined = undefined;
  #timer: NodeTimer | undefined = undefined;
  /** Whether a timer is set (it may be a plain number off Node). */
  #armed = false;
  /** The deadline the timer was set for: a firing timer expires at least what was due by then. */
  #armedFor = 0;
  #holds = false;
  readonly #fire = (): void => this.#expire();

  /** Lists `call`, due `timeoutMs` from `startedAt` (a {@link preciseNow} reading). */
  add(call: Timed, startedAt: number, timeoutMs: number): void {
    call.deadline = startedAt + timeoutMs;
    call.listed = true;
    const newest = this.#newest;
    call.older = newest;
    call.newer = undefined;
    if (newest === undefined) this.#oldest = call;
    else newest.newer = call;
    this.#newest = call;
    if (!this.#armed) this.#arm(call.deadline);
    else if (!this.#holds && this.#timer !== undefined) {
      this.#holds = true;
      this.#timer.ref();
    }
  }

  /** Takes `call` out of the list (it settled, or expires). */
  remove(call: Timed): void {
    if (!call.listed) return;
    call.listed = false;
    const { older, newer } = call;
    if (older === undefined) this.#oldest = newer;
    else older.newer = newer;
    if (newer === undefined) this.#newest = older;
    else newer.older = older;
    call.older = call.newer = undefined;
    if (this.#oldest === undefined && this.#holds) {
      this.#holds = false;
      this.#timer!.unref();
    }
  }

  #arm(deadline: number): void {
    this.#armed = true;
    this.#armedFor = deadline;
    const timer = setTimeout(this.#fire, Math.max(0, Math.ceil(deadline - preciseNow()))) as unknown;
    if (typeof timer === "object" && timer !== null && typeof (timer as NodeTimer).unref === "function") {
      this.#timer = timer as NodeTimer;
      this.#holds = true;
    } else {
      this.#timer = undefined;
    }
  }

  #expire(): void {
    this.#armed = false;
    this.#timer = undefined;
    this.#holds = false;
    // What the timer was set for is due, even on a clock that has not moved as far (fake timers).
    const now = Math.max(preciseNow(), this.#armedFor);
    let call = this.#oldest;
    while (call !== undefined && call.deadline <= now) {
      this.remove(call);
      call.expire();
      call = this.#oldest;
    }
    // An observer of the failures may have made a call meanwhile, which set the timer.
    if (call !== undefined && !this.#armed) this.#arm(call.deadline);
  }
}
