// One guarded asynchronous call of the resilient store (../resilient-store.ts).

import { type CallSignal, type PolicySet, SENT_AT, type StoreResult } from "../store.ts";
import type { Timed } from "./deadlines.ts";
import type { LateAnswers } from "./late-answers.ts";

/** What a call's deadline runs on the store that made it. */
export const EXPIRE: unique symbol = Symbol("expire");

/** The store's side of a call. */
export interface CallOwner {
  [EXPIRE](call: Call<unknown>): void;
}

/**
 * One guarded asynchronous call: its deadline's entry, the signal its store gets (`aborted` once
 * the caller stopped waiting, at the deadline), its promise's ends, and what a late answer does.
 * A consume keeps its arguments here, so that no closure is made for it. Every field is set in
 * the constructor (no base class, no field initializers): one is made per call.
 */
export class Call<T> implements Timed, CallSignal {
  declare deadline: number;
  declare older: Timed | undefined;
  declare newer: Timed | undefined;
  declare listed: boolean;
  declare aborted: boolean;
  /** Answered, failed or abandoned: the caller's promise is settled or being settled. */
  declare done: boolean;
  declare resolve: (value: T) => void;
  declare reject: (error: unknown) => void;
  /** A consume's: what a late admission gives back, and into what. */
  declare late: LateAnswers | undefined;
  declare set: PolicySet | undefined;
  declare key: string;
  declare cost: number;
  declare nowMs: number;
  /** A consume's answer made into what the caller gets (the limiter's decision). */
  declare map: ((result: StoreResult, cost: number) => unknown) | undefined;
  declare readonly owner: CallOwner;
  declare readonly atMs: number;
  declare readonly probe: boolean;
  declare readonly cold: boolean;
  declare readonly onLate: ((value: T) => void) | undefined;
  /** When it was sent ({@link SENT_AT}); undefined without a deadline. */
  declare [SENT_AT]: number | undefined;

  constructor(owner: CallOwner, atMs: number, probe: boolean, cold: boolean, onLate: ((value: T) => void) | undefined) {
    this.deadline = 0;
    this.older = undefined;
    this.newer = undefined;
    this.listed = false;
    this.aborted = false;
    this.done = false;
    this.resolve = noop;
    this.reject = noop;
    this.late = undefined;
    this.set = undefined;
    this.key = "";
    this.cost = 0;
    this.nowMs = 0;
    this.map = undefined;
    this.owner = owner;
    this.atMs = atMs;
    this.probe = probe;
    this.cold = cold;
    this.onLate = onLate;
    this[SENT_AT] = undefined;
  }

  expire(): void {
    this.owner[EXPIRE](this as Call<unknown>);
  }

  /** An answer that came after the deadline: a consume's charge goes back, another call's `onLate` runs. */
  lateAnswer(value: T): void {
    if (this.late !== undefined) this.late.charge(this.set!, this.key, this.cost, this.nowMs, value as StoreResult);
    else this.onLate?.(value);
  }
}

const noop = (): void => {};

/** The call whose promise is being made: one executor for every call, no closure per call. */
let capturing: Call<unknown> | undefined;
function capture(resolve: (value: unknown) => void, reject: (error: unknown) => void): void {
  capturing!.resolve = resolve;
  capturing!.reject = reject;
}

/** A promise settled by `call.resolve` and `call.reject`. */
export function promiseOf<T>(call: Call<T>): Promise<T> {
  capturing = call as Call<unknown>;
  const promise = new Promise<T>(capture as (resolve: (value: T) => void, reject: (error: unknown) => void) => void);
  capturing = undefined;
  return promise;
}
