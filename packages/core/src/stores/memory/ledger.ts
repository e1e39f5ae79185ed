import type { PolicySet, StoreResult } from "../store.ts";
import { idOf, serialOf } from "../ids.ts";
import type { HeldReservation } from "../store.ts";

/*
 * The memory store's reservations: records in the order they were made, each handed to its
 * reservation as a HeldReservation, found again by id when settled from elsewhere.
 */

/** What a record settles through: the store that holds the charged state. */
export interface RecordSettler {
  settleRecord(set: PolicySet, record: LedgerRecord, actual: number, nowMs: number): boolean;
}

/**
 * One outstanding reservation: what it was charged, into what, until when. Handed to the limiter
 * as a {@link HeldReservation}: settling through it looks nothing up, and its id string is made
 * only if read.
 */
export class LedgerRecord implements HeldReservation {
  /** Until settled, cancelled or swept. */
  live = true;
  /** The id it was recorded under by `reserve()`, when it was given one (it is then in `#byId`). */
  given: string | undefined = undefined;
  constructor(
    readonly store: RecordSettler,
    readonly set: PolicySet,
    /** The full key (namespace and key) it was reserved under. */
    readonly key: string,
    readonly cost: number,
    /** The store's answer to the reservation: the marks follow the figures (from `at`). Never changed once answered. */
    readonly result: StoreResult,
    readonly at: number,
    readonly expiresAtUs: number,
    /** Its serial number: its id, unless it was given one, is `idOf(serial)`. */
    readonly serial: number,
  ) {}

  get id(): string {
    return this.given ?? idOf(this.serial);
  }

  settle(actual: number, nowMs: number): boolean {
    return this.store.settleRecord(this.set, this, actual, nowMs);
  }
}

/** Outstanding reservations, bounded; what is dropped keeps its estimate charged. */
export class Ledger {
  /**
   * Reservations in the order they were made (so by serial number), from `#head` on: the live
   * ones, and settled ones not yet dropped (at most about as many, see `reserveHeld`). A handle keeps
   * its record; `settle(id)` finds it by binary search on the serial number of an id this process
   * made, or in `#byId` for a reservation recorded under an id given to `reserve()`.
   */
  #ledger: LedgerRecord[] = [];
  #head = 0;
  #live = 0;
  #byId = new Map<string, LedgerRecord>();
  readonly #maxReservations: number;

  constructor(maxReservations: number) {
    this.#maxReservations = maxReservations;
  }

  /** Reservations outstanding. */
  get live(): number {
    return this.#live;
  }

  /** The live record named `id` (given to `reserve()`, or made here from its serial number). */
  get(id: string): LedgerRecord | undefined {
    return this.#byId.get(id) ?? this.#find(serialOf(id));
  }

  /** Records `record` under an id given to `reserve()`. */
  name(record: LedgerRecord, id: string): void {
    record.given = id;
    this.#byId.set(id, record);
  }

  /** Before a new record: when full, expired records go first, then the oldest. */
  makeRoom(now: number): void {
    if (this.#live >= this.#maxReservations) this.#trim(now);
  }

  add(record: LedgerRecord): void {
    const ledger = this.#ledger;
    // Records no longer live (settled, or swept: those before #head) are dropped once they
    // outnumber the live ones by 16: O(1) per reservation, and the array stays O(live).
    if (ledger.length > 2 * this.#live + 16) this.#compact();
    ledger.push(record);
    this.#live++;
  }

  drop(record: LedgerRecord): void {
    record.live = false;
    this.#live--;
    if (record.given !== undefined) this.#byId.delete(record.given);
  }

  /** The live record with this serial number, by binary search (the ledger is in serial order). */
  #find(serial: number | undefined): LedgerRecord | undefined {
    if (serial === undefined) return undefined;
    const ledger = this.#ledger;
    let lo = this.#head;
    let hi = ledger.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >>> 1;
      const s = ledger[mid]!.serial;
      if (s === serial) return ledger[mid]!.live ? ledger[mid] : undefined;
      if (s < serial) lo = mid + 1;
      else hi = mid - 1;
    }
    return undefined;
  }

  /** Keeps the live records only, in order. */
  #compact(): void {
    const ledger = this.#ledger;
    let n = 0;
    for (let i = this.#head; i < ledger.length; i++) if (ledger[i]!.live) ledger[n++] = ledger[i]!;
    ledger.length = n;
    this.#head = 0;
  }

  /** Expired reservations go first; then, while still full, the oldest (its estimate stays charged). */
  #trim(now: number): void {
    // Oldest first: with one ttl, the expired ones are at the front.
    const ledger = this.#ledger;
    while (this.#head < ledger.length) {
      const record = ledger[this.#head]!;
      if (record.live) {
        if (this.#live < this.#maxReservations && record.expiresAtUs > now) break;
        this.drop(record);
      }
      this.#head++;
    }
  }

  clear(): void {
    for (let i = this.#head; i < this.#ledger.length; i++) this.#ledger[i]!.live = false;
    this.#ledger = [];
    this.#head = this.#live = 0;
    this.#byId.clear();
  }
}
