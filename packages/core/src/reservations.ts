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
import type { Decision } from "./limiter.ts";
import type { StoreResult } from "./stores/store.ts";
import type { LedgerRecord } from "./stores/memory-store.ts";
import { describeValue, FloodgateError } from "./errors.ts";

/**
 * How long a reservation can be settled by default: ten minutes (600,000 ms), or a
 * concurrency policy's timeout when longer. Long enough for a streamed response that runs for
 * minutes; short enough that abandoned records do not pile up. After it, the reservation counts
 * as its estimate and settling it does nothing.
 */
export const DEFAULT_RESERVATION_TTL_MS = 600_000;

/** The longest `ttl` a reservation takes: one day. */
export const MAX_RESERVATION_TTL_MS = 86_400_000;

/** Options of `limiter.reserve()`. */
export interface ReserveOptions {
  /** Units to reserve now (default 1): a whole number >= 1, charged to every policy but concurrency ones (one unit each). */
  estimate?: number;
  /**
   * How long the reservation can be settled (default ten minutes, or the longest concurrency
   * timeout of the limiter when longer; at most one day, and never shorter than a concurrency
   * timeout): milliseconds or a string such as `"30s"`. Unsettled by then, it counts as its estimate.
   */
  ttl?: number | string;
}

/** Options of `limiter.settle()`. */
export interface SettleOptions {
  /** The reservation's {@link Reservation.id}. */
  id: string;
  /** Its true cost: a whole number >= 0 (0 cancels it). */
  actual: number;
}

/**
 * What `limiter.reserve()` gives: the decision and, when admitted, the handle to settle it.
 * A denial reserves nothing; its `settle` and `cancel` do nothing and answer `false`.
 */
export interface Reservation {
  /** The decision, as `limit()` would give it; `charge` is `undefined` (settle, do not refund). */
  readonly decision: Decision;
  /** Names the ledger record in the store: unique, plain text, safe in JSON; `""` for a denial. */
  readonly id: string;
  /** The key it was reserved under. */
  readonly key: string;
  /** The units reserved. */
  readonly estimate: number;
  /**
   * Charges `actual` instead of the estimate, into what the reservation was charged in: the
   * difference goes back, or the excess is charged past the limit (later requests wait until it
   * recovers). One store round trip. Idempotent: once settled or cancelled (here or through
   * `limiter.settle`), further calls change nothing and answer `false`. Resolves `true` when this
   * call settled it; rejects with `STORE_*` when the store failed (the reservation may then
   * still be outstanding: a retry is safe).
   */
  settle(actual: number): Promise<boolean>;
  /** Gives everything back (settles at 0): for work that failed before doing anything. Idempotent. */
  cancel(): Promise<boolean>;
}

/** Whole number >= 0 for an actual cost. */
export function checkActual(actual: unknown): number {
  if (typeof actual !== "number" || !Number.isInteger(actual) || actual < 0 || actual > Number.MAX_SAFE_INTEGER) {
    throw new FloodgateError(
      "INVALID_ARGUMENT",
      `Invalid actual cost: received ${
        describeValue(actual)
      }; expected a whole number from 0 to 9007199254740991 (0 cancels the reservation).`,
    );
  }
  return actual;
}

const ID_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

/** A reservation id as `limiter.settle()` accepts it. */
export function checkId(id: unknown): string {
  if (typeof id !== "string" || !ID_PATTERN.test(id)) {
    throw new FloodgateError(
      "INVALID_ARGUMENT",
      `Invalid reservation id: received ${
        describeValue(id)
      }; expected the \`id\` of a reservation of this limiter (1 to 64 characters from A-Z a-z 0-9 _ -), as it was returned.`,
    );
  }
  return id;
}

/**
 * Reservation ids: 64 random bits per process (per copy of this module) in base 36, then a
 * decimal serial number (a number's decimal string is V8's cheap conversion; base 36 costs a
 * runtime call per id). Unique across processes with overwhelming probability, never reused
 * within one. The memory store's ledger records the serial number alone, and the string is
 * made only when a reservation's `id` is read: making and hashing it cost ≈ 900 machine
 * instructions per reservation (callgrind).
 */
let idPrefix: string | undefined;
let idCounter = 0;

function prefixOfIds(): string {
  const words = new Uint32Array(2);
  const crypto = (globalThis as { crypto?: { getRandomValues?(a: Uint32Array): Uint32Array } }).crypto;
  if (typeof crypto?.getRandomValues === "function") crypto.getRandomValues(words);
  else {
    words[0] = Math.random() * 2 ** 32;
    words[1] = Math.random() * 2 ** 32;
  }
  return idPrefix = `${words[0]!.toString(36)}${words[1]!.toString(36)}_`;
}

/** The next reservation serial number of this process: its id is {@link idOf} it. */
export const nextSerial = (): number => ++idCounter;

/** The id of the reservation with this serial number. */
export const idOf = (serial: number): string => (idPrefix ?? prefixOfIds()) + serial;

/** A fresh reservation id, for stores that record ids as strings. */
export const nextId = (): string => idOf(nextSerial());

/** The serial number of an id this process made ({@link idOf}); `undefined` for any other string. */
export function serialOf(id: string): number | undefined {
  const prefix = idPrefix;
  if (prefix === undefined || id.length <= prefix.length || !id.startsWith(prefix)) return undefined;
  const serial = Number(id.slice(prefix.length));
  // Only the canonical spelling: "…_007" or "…_1e3" name no reservation.
  return Number.isSafeInteger(serial) && serial >= 1 && serial <= idCounter && prefix + serial === id ? serial : undefined;
}

/**
 * What a reservation calls in its limiter: `decide` makes its decision from the store's answer
 * (linking it to the reservation, for its `pending`); `settle` settles it, answering as the store
 * does (a synchronous store's answer as it is). `ref` is the id, or the memory store's record of it.
 */
export interface ReservationVia {
  decide(result: StoreResult, reservation: ReservationImpl): Decision;
  settle(key: string, ref: string | LedgerRecord, actual: number): boolean | Promise<boolean>;
}

const NOTHING = /* @__PURE__ */ Promise.resolve(false);
const SETTLED = /* @__PURE__ */ Promise.resolve(true);
/** The `pending` of a decision after which the limiter does nothing. */
export const RESOLVED: Promise<void> = /* @__PURE__ */ Promise.resolve();
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
  /** The id; or, in the memory store, its record, whose serial number the id is made from when read (see {@link idOf}); `""` for a denial. */
  #ref: string | LedgerRecord;
  #via: ReservationVia;
  /** The store's answer, made into the decision when that is first read. */
  #result: StoreResult;
  #decision: Decision | undefined;
  /** The settle or cancel under way or done; `undefined` before one, and again after one failed (a retry is safe). */
  #done: Promise<boolean> | undefined;
  /** What `pending()` handed out before any settle started. */
  #waiter: { promise: Promise<void>; resolve: () => void } | undefined;

  constructor(result: StoreResult, via: ReservationVia, ref: string | LedgerRecord, key: string, estimate: number) {
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
    return typeof ref === "string" ? ref : idOf(ref.serial);
  }

  cancel(): Promise<boolean> {
    return this.settle(0);
  }

  toJSON(): object {
    return { key: this.key, id: this.id, estimate: this.estimate, decision: this.decision };
  }
}
