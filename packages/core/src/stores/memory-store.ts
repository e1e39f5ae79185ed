import { type Algorithm, algorithmOf, FIELDS_PER_POLICY, toMicros } from "../algorithms/algorithm.ts";
import { blockFor, overrideBlocked, penalize } from "./block.ts";
import { FloodgateError } from "../errors.ts";
import type { Policy } from "../policies.ts";
import type { HeldReservation, PolicySet, RateLimitStore, StoreResult } from "./store.ts";
import { type OptionSpecs, parseOptions, range } from "../validation.ts";
import { idOf, nextSerial, serialOf } from "./ids.ts";

/** Options of {@link memoryStore}. */
export interface MemoryStoreOptions {
  /**
   * Most identifiers held at once (default 100,000, about 10 MB). When full, expired entries go
   * first, then the least recently used.
   */
  maxKeys?: number;
  /**
   * Most reservations outstanding at once (default 100,000). When full, expired ones go first,
   * then the oldest: it can no longer be settled or cancelled and counts as its estimate.
   */
  maxReservations?: number;
}

/** The embedded store: bounded, synchronous, with no timer and no work at import time. */
export interface MemoryStore extends RateLimitStore {
  readonly name: "memory";
  readonly synchronous: true;
  /** Identifiers currently held. */
  readonly size: number;
  /** Reservations outstanding (not yet settled, cancelled, or swept after their `ttl`). */
  readonly reservations: number;
  reserve(set: PolicySet, key: string, cost: number, nowMs: number, id: string, ttlMs: number): StoreResult;
  settle(set: PolicySet, key: string, id: string, actual: number, nowMs: number): boolean;
  reserveHeld(set: PolicySet, key: string, cost: number, nowMs: number, ttlMs: number): StoreResult | HeldReservation;
  dispose(): void;
}

/**
 * One outstanding reservation: what it was charged, into what, until when. Handed to the limiter
 * as a {@link HeldReservation}: settling through it looks nothing up, and its id string is made
 * only if read.
 */
class LedgerRecord implements HeldReservation {
  /** Until settled, cancelled or swept. */
  live = true;
  /** The id it was recorded under by `reserve()`, when it was given one (it is then in `#byId`). */
  given: string | undefined = undefined;
  constructor(
    readonly store: MemoryStoreImpl,
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

const DEFAULT_MAX_KEYS = 100_000;
/** A map value packs a slot number and a layout id: slot × LAYOUTS + layout. */
const LAYOUT_BITS = 8;
const LAYOUTS = 1 << LAYOUT_BITS;
const LAYOUT_MASK = LAYOUTS - 1;
const MAX_KEYS = Math.floor(2 ** 31 / LAYOUTS) - 1;
/** Per slot, before the policies' state: expiry (µs), the used-since-passed mark (CLOCK) and the end of its block (µs, 0: none). */
const HEADER = 3;
/** Where in a slot the end of its block is. */
const BLOCKED = 2;

const OPTIONS: OptionSpecs = {
  maxKeys: /* @__PURE__ */ range("a whole number", 1, MAX_KEYS),
  maxReservations: /* @__PURE__ */ range("a whole number", 1, 100_000_000),
};

/**
 * The state of every key that shares one sequence of policy kinds, in one growable
 * Float64Array: a slot is [expiresAtUs, usedMark, blockedUntilUs, ...state of each policy].
 */
class Layout {
  declare readonly width: number;
  declare readonly offsets: number[];
  declare readonly algorithms: Algorithm[];
  /** Offsets (within a slot) that hold a log's reference. */
  declare readonly logOffsets: number[];
  /** Per policy: whether its algorithm keeps a log (only those look one up). */
  declare readonly keepsLog: boolean[];
  declare data: Float64Array;
  capacity = 16;
  top = 0;
  readonly free: number[] = [];
  /** A zeroed slot, evaluated for keys that have no state yet (nothing is allocated for a denial). */
  declare readonly blank: Float64Array;
  declare readonly id: number;

  constructor(id: number, set: PolicySet) {
    this.id = id;
    let width = HEADER;
    this.offsets = [];
    this.algorithms = [];
    this.logOffsets = [];
    this.keepsLog = [];
    for (const policy of set.policies) {
      const algorithm = algorithmOf(policy);
      this.offsets.push(width);
      this.algorithms.push(algorithm);
      this.keepsLog.push(algorithm.keepsLog);
      if (algorithm.keepsLog) this.logOffsets.push(width);
      width += algorithm.width;
    }
    this.width = width;
    this.data = new Float64Array(this.capacity * width);
    this.blank = new Float64Array(width);
  }

  allocate(): number {
    const slot = this.free.length > 0 ? this.free.pop()! : this.top++;
    if (slot >= this.capacity) {
      this.capacity *= 2;
      const grown = new Float64Array(this.capacity * this.width);
      grown.set(this.data);
      this.data = grown;
    }
    return slot; // the caller writes the whole slot
  }
}

/**
 * Creates the in-memory store: the default when a limiter is given none. Safe at global scope on
 * edge runtimes (no timer, no I/O); expired entries are swept lazily, only when the store is full.
 *
 * @param options.maxKeys - most identifiers held (default 100,000)
 * @example
 * const limiter = createRateLimiter({ policy: slidingWindow({ limit: 100, window: "1m" }), store: memoryStore({ maxKeys: 50_000 }) });
 */
export function memoryStore(options: MemoryStoreOptions = {}): MemoryStore {
  const { maxKeys = DEFAULT_MAX_KEYS, maxReservations = DEFAULT_MAX_KEYS } = parseOptions<MemoryStoreOptions>(
    options,
    "memoryStore()",
    OPTIONS,
  );
  return new MemoryStoreImpl(maxKeys, maxReservations);
}

class MemoryStoreImpl implements MemoryStore {
  readonly name = "memory" as const;
  readonly ownsClock = false;
  readonly synchronous = true;
  /** Full key → slot × LAYOUTS + layout id, in (approximate) least-recently-used order. */
  #keys = new Map<string, number>();
  #layouts: Layout[] = [];
  #layoutBySignature = new Map<string, Layout>();
  #layoutBySet = new WeakMap<PolicySet, Layout>();
  #lastSet: PolicySet | undefined;
  #lastLayout: Layout | undefined;
  /** Key prefix per namespace: the first namespace uses keys as they are. */
  #namespaces = new Map<string, string>();
  /** Never a prefix at first (no prefix contains `{`): always a string, so comparing it stays a string compare. */
  #lastPrefix = "{";
  #lastNamespace = "";
  /** Sliding logs; a slot holds a log's index + 1 (every tracked key's logs are created with it, in #adopt). */
  #logs: (number[] | undefined)[] = [];
  #freeLogs: number[] = [];
  /** Where eviction goes on from: the CLOCK hand over `#keys`, oldest first. */
  #clockHand: MapIterator<[string, number]> = this.#keys.entries();
  #sinceSweep: number;
  readonly #maxKeys: number;
  readonly #sweepEvery: number;
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

  constructor(maxKeys: number, maxReservations: number) {
    this.#maxKeys = maxKeys;
    this.#maxReservations = maxReservations;
    this.#sweepEvery = Math.max(1, maxKeys >> 3);
    this.#sinceSweep = this.#sweepEvery;
  }

  get size(): number {
    return this.#keys.size;
  }

  get reservations(): number {
    return this.#live;
  }

  reserve(set: PolicySet, key: string, cost: number, nowMs: number, id: string, ttlMs: number): StoreResult {
    const record = this.reserveHeld(set, key, cost, nowMs, ttlMs);
    if (Array.isArray(record)) return record as StoreResult;
    (record as LedgerRecord).given = id;
    this.#byId.set(id, record as LedgerRecord);
    return (record as LedgerRecord).result;
  }

  settle(set: PolicySet, key: string, id: string, actual: number, nowMs: number): boolean {
    const record = this.#byId.get(id) ?? this.#find(serialOf(id));
    // Another key's id settles nothing (nor is it spent).
    if (record === undefined || record.key !== this.#fullKey(set.prefix, key)) return false;
    return this.settleRecord(set, record, actual, nowMs);
  }

  reserveHeld(set: PolicySet, key: string, cost: number, nowMs: number, ttlMs: number): StoreResult | HeldReservation {
    const result = this.#decide(set, key, cost, nowMs, true);
    if (result[0] !== 1) return result;
    if (this.#live >= this.#maxReservations) this.#trimLedger(toMicros(nowMs));
    const record = new LedgerRecord(
      this,
      set,
      this.#fullKey(set.prefix, key),
      cost,
      result,
      1 + set.policies.length * FIELDS_PER_POLICY,
      toMicros(nowMs + ttlMs),
      nextSerial(),
    );
    const ledger = this.#ledger;
    // Records no longer live (settled, or swept: those before #head) are dropped once they
    // outnumber the live ones by 16: O(1) per reservation, and the array stays O(live).
    if (ledger.length > 2 * this.#live + 16) this.#compactLedger();
    ledger.push(record);
    this.#live++;
    return record;
  }

  /** Settles a record of this store (of the key its handle was reserved under). */
  settleRecord(set: PolicySet, record: LedgerRecord, actual: number, nowMs: number): boolean {
    if (!record.live) return false;
    this.#drop(record);
    const now = toMicros(nowMs);
    // Past its ttl, a reservation counts as its estimate (as if swept at once).
    if (record.expiresAtUs <= now) return false;
    const layout = this.#layout(set);
    const ref = this.#keys.get(record.key);
    // The key's state was evicted or reset, or belongs to another set: nothing it was charged in counts.
    if (ref === undefined || (ref & LAYOUT_MASK) !== layout.id) return true;
    const base = (ref >>> LAYOUT_BITS) * layout.width;
    const data = layout.data;
    let expiry = 0;
    for (let p = 0; p < layout.algorithms.length; p++) {
      const o = base + layout.offsets[p]!;
      const log = layout.keepsLog[p] ? this.#logs[data[o]! - 1] : undefined;
      const e = layout.algorithms[p]!.settle(set.policies[p]!, data, o, log, now, record.cost, actual, record.result[record.at + p]!);
      if (e > expiry) expiry = e;
    }
    data[base] = expiry;
    return true;
  }

  #drop(record: LedgerRecord): void {
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
  #compactLedger(): void {
    const ledger = this.#ledger;
    let n = 0;
    for (let i = this.#head; i < ledger.length; i++) if (ledger[i]!.live) ledger[n++] = ledger[i]!;
    ledger.length = n;
    this.#head = 0;
  }

  /** Expired reservations go first; then, while still full, the oldest (its estimate stays charged). */
  #trimLedger(now: number): void {
    // Oldest first: with one ttl, the expired ones are at the front.
    const ledger = this.#ledger;
    while (this.#head < ledger.length) {
      const record = ledger[this.#head]!;
      if (record.live) {
        if (this.#live < this.#maxReservations && record.expiresAtUs > now) break;
        this.#drop(record);
      }
      this.#head++;
    }
  }

  consume(set: PolicySet, key: string, cost: number, nowMs: number): StoreResult {
    return this.#decide(set, key, cost, nowMs, true);
  }

  peek(set: PolicySet, key: string, nowMs: number): StoreResult {
    return this.#decide(set, key, 1, nowMs, false);
  }

  refund(set: PolicySet, key: string, cost: number, nowMs: number, marks?: readonly number[]): void {
    const layout = this.#layout(set);
    const fullKey = this.#fullKey(set.prefix, key);
    const ref = this.#keys.get(fullKey);
    if (ref === undefined || (ref & LAYOUT_MASK) !== layout.id) return;
    const now = toMicros(nowMs);
    const base = (ref >>> LAYOUT_BITS) * layout.width;
    const data = layout.data;
    let expiry = 0;
    for (let p = 0; p < layout.algorithms.length; p++) {
      const o = base + layout.offsets[p]!;
      const log = layout.keepsLog[p] ? this.#logs[data[o]! - 1] : undefined;
      const e = layout.algorithms[p]!.refund(set.policies[p]!, data, o, log, now, cost, marks?.[p]);
      if (e > expiry) expiry = e;
    }
    data[base] = expiry;
  }

  reset(set: PolicySet, key: string): void {
    const fullKey = this.#fullKey(set.prefix, key);
    const ref = this.#keys.get(fullKey);
    if (ref === undefined) return;
    this.#keys.delete(fullKey);
    this.#release(ref);
  }

  penalty(set: PolicySet, key: string, cost: number, nowMs: number): void {
    const now = toMicros(nowMs);
    const { layout, base } = this.#slot(set, key, now);
    const data = layout.data;
    const out = [0, 0, 0, 0, 0];
    let expiry = data[base]!;
    for (let p = 0; p < layout.algorithms.length; p++) {
      const o = base + layout.offsets[p]!;
      const log = layout.keepsLog[p] ? this.#logs[data[o]! - 1] : undefined;
      const e = penalize(layout.algorithms[p]!, set.policies[p]!, data, o, log, now, cost, out);
      if (e > expiry) expiry = e;
    }
    data[base] = expiry;
  }

  block(set: PolicySet, key: string, durationMs: number, nowMs: number): void {
    const now = toMicros(nowMs);
    const { layout, base } = this.#slot(set, key, now);
    const until = now + durationMs * 1000;
    layout.data[base + BLOCKED] = until;
    if (until > layout.data[base]!) layout.data[base] = until;
  }

  unblock(set: PolicySet, key: string): void {
    const layout = this.#layout(set);
    const ref = this.#keys.get(this.#fullKey(set.prefix, key));
    if (ref !== undefined && (ref & LAYOUT_MASK) === layout.id) layout.data[(ref >>> LAYOUT_BITS) * layout.width + BLOCKED] = 0;
  }

  /** This key's slot in this set, created empty when it has none (as a charge would). */
  #slot(set: PolicySet, key: string, now: number): { layout: Layout; base: number } {
    const layout = this.#layout(set);
    const fullKey = this.#fullKey(set.prefix, key);
    const ref = this.#keys.get(fullKey);
    if (ref !== undefined && (ref & LAYOUT_MASK) === layout.id) return { layout, base: (ref >>> LAYOUT_BITS) * layout.width };
    if (ref !== undefined) {
      this.#keys.delete(fullKey);
      this.#release(ref);
    }
    layout.blank.fill(0);
    const logs = layout.logOffsets.length > 0 ? layout.keepsLog.map((keeps) => (keeps ? [] : undefined)) : undefined;
    return { layout, base: this.#adopt(fullKey, layout, now, 0, logs) };
  }

  dispose(): void {
    this.#keys.clear();
    for (let i = this.#head; i < this.#ledger.length; i++) this.#ledger[i]!.live = false;
    this.#ledger = [];
    this.#head = this.#live = 0;
    this.#byId.clear();
    this.#clockHand = this.#keys.entries();
    this.#layouts = [];
    this.#layoutBySignature.clear();
    this.#layoutBySet = new WeakMap();
    this.#lastSet = this.#lastLayout = undefined;
    this.#logs = [];
    this.#freeLogs = [];
  }

  #decide(set: PolicySet, key: string, cost: number, nowMs: number, charge: boolean): StoreResult {
    const layout = this.#layout(set);
    const fullKey = this.#fullKey(set.prefix, key);
    const now = toMicros(nowMs);
    let ref = this.#keys.get(fullKey);
    if (ref !== undefined && (ref & LAYOUT_MASK) !== layout.id) {
      // The same key under another policy layout: a reconfigured limiter starts afresh.
      this.#keys.delete(fullKey);
      this.#release(ref);
      ref = undefined;
    }
    const policies = set.policies;
    if (ref !== undefined && policies.length === 1) {
      // One policy on a tracked key (the hot path): one call that decides and, when admitted, charges.
      // Room for the charge's mark at once: growing the array later would copy it.
      const out = charge ? [0, 0, 0, 0, 0, 0] : [0, 0, 0, 0, 0];
      const data = layout.data;
      const base = (ref >>> LAYOUT_BITS) * layout.width;
      data[base + 1] = 1; // used since it last reached the old end (see #makeRoom)
      const log = layout.keepsLog[0] ? this.#logs[data[base + HEADER]! - 1] : undefined;
      const algorithm = layout.algorithms[0]!;
      const blocked = data[base + BLOCKED]! > now;
      const expiry = algorithm.apply(policies[0]!, data, base + HEADER, log, now, cost, out, 1, charge && !blocked);
      if (blocked || (out[1] === 0 && charge && policies[0]!.blockMs > 0)) {
        return this.#denyBlocked(layout, base, policies, now, out, !blocked);
      }
      if (out[1] === 1) {
        out[0] = 1;
        if (charge) {
          data[base] = expiry;
          out[5] = algorithm.mark(policies[0]!, data, base + HEADER, log);
        }
      } else if (charge) {
        out.pop(); // a denial carries no mark
      }
      return out;
    }
    return this.#decideAll(layout, policies, fullKey, ref, now, cost, charge);
  }

  /**
   * Every policy is evaluated first, and all are charged only when every one admits. A key with
   * no state is decided on the layout's blank slot; it takes a slot only for a charged admission.
   */
  #decideAll(
    layout: Layout,
    policies: readonly Policy[],
    fullKey: string,
    ref: number | undefined,
    now: number,
    cost: number,
    charge: boolean,
  ): StoreResult {
    const count = policies.length;
    // Packed, as the single-policy path's literal: `apply` then sees one kind of array.
    const out = [0];
    for (let p = 0; p < count; p++) out.push(0, 0, 0, 0);
    let data = layout.blank;
    let base = 0;
    let logs: (number[] | undefined)[] | undefined;
    if (ref === undefined) {
      data.fill(0);
      // A new log: an empty array (the rest of its state is the blank slot's zeros).
      if (layout.logOffsets.length > 0) logs = layout.keepsLog.map((keeps) => (keeps ? [] : undefined));
    } else {
      data = layout.data;
      base = (ref >>> LAYOUT_BITS) * layout.width;
      data[base + 1] = 1;
      if (layout.logOffsets.length > 0) {
        logs = layout.keepsLog.map((keeps, p) => (keeps ? this.#logs[data[base + layout.offsets[p]!]! - 1] : undefined));
      }
    }
    let allowed = 1;
    for (let p = 0; p < count; p++) {
      const i = 1 + p * FIELDS_PER_POLICY;
      layout.algorithms[p]!.apply(policies[p]!, data, base + layout.offsets[p]!, logs?.[p], now, cost, out, i, false);
      if (out[i] === 0) allowed = 0;
    }
    out[0] = allowed;
    if (ref !== undefined && data[base + BLOCKED]! > now) return this.#denyBlocked(layout, base, policies, now, out, false);
    if (allowed === 0 && charge && blockFor(policies, out) > 0) {
      if (ref === undefined) base = this.#adopt(fullKey, layout, now, 0, logs);
      return this.#denyBlocked(layout, base, policies, now, out, true);
    }
    if (allowed === 0 || !charge) return out;
    let expiry = 0;
    for (let p = 0; p < count; p++) {
      const e = layout.algorithms[p]!.apply(
        policies[p]!,
        data,
        base + layout.offsets[p]!,
        logs?.[p],
        now,
        cost,
        out,
        1 + p * FIELDS_PER_POLICY,
        true,
      );
      if (e > expiry) expiry = e;
    }
    for (let p = 0; p < count; p++) out.push(layout.algorithms[p]!.mark(policies[p]!, data, base + layout.offsets[p]!, logs?.[p]));
    if (ref === undefined) this.#adopt(fullKey, layout, now, expiry, logs);
    else data[base] = expiry;
    return out;
  }

  /**
   * A denial while the key is blocked, or one that blocks it (`start`: a consume denied by a
   * policy with a `block`, whose block then starts now): every policy denied, 0 remaining, and
   * waits and resets that last at least until the block ends. `out` holds the figures as the
   * policies left them, without marks.
   */
  #denyBlocked(layout: Layout, base: number, policies: readonly Policy[], now: number, out: number[], start: boolean): StoreResult {
    const data = layout.data;
    if (start) {
      const until = now + blockFor(policies, out) * 1000;
      if (until > data[base + BLOCKED]!) data[base + BLOCKED] = until;
      if (until > data[base]!) data[base] = until;
    }
    overrideBlocked(out, policies.length, data[base + BLOCKED]!, now);
    return out;
  }

  /** Stores a new key's state, decided and charged on the layout's blank slot; returns where its slot starts. */
  #adopt(fullKey: string, layout: Layout, now: number, expiry: number, logs: (number[] | undefined)[] | undefined): number {
    const ref = this.#insert(fullKey, layout, now);
    const base = (ref >>> LAYOUT_BITS) * layout.width;
    const data = layout.data;
    data.set(layout.blank, base);
    data[base] = expiry;
    data[base + 1] = 0;
    data[base + BLOCKED] = 0;
    if (logs === undefined) return base;
    for (let p = 0; p < logs.length; p++) {
      const log = logs[p];
      if (log === undefined) continue;
      const at = this.#freeLogs.pop() ?? this.#logs.length;
      this.#logs[at] = log;
      data[base + layout.offsets[p]!] = at + 1;
    }
    return base;
  }

  #insert(fullKey: string, layout: Layout, now: number): number {
    if (this.#keys.size >= this.#maxKeys) this.#makeRoom(now);
    const slot = layout.allocate();
    const ref = (slot << LAYOUT_BITS) | layout.id;
    this.#keys.set(fullKey, ref);
    this.#sinceSweep++;
    return ref;
  }

  /**
   * Expired entries first (a full sweep, at most once per maxKeys/8 insertions), then the least
   * recently used, approximated by a second chance (CLOCK): the map is in insertion order; an
   * entry used since it last reached the old end moves to the recent end with its mark cleared,
   * the first unmarked one is evicted. A hit costs one write instead of a map delete and set.
   */
  #makeRoom(now: number): void {
    if (this.#sinceSweep >= this.#sweepEvery) {
      this.#sinceSweep = 0;
      for (const [fullKey, ref] of this.#keys) {
        const layout = this.#layouts[ref & LAYOUT_MASK]!;
        if (layout.data[(ref >>> LAYOUT_BITS) * layout.width]! <= now) {
          this.#keys.delete(fullKey);
          this.#release(ref);
        }
      }
    }
    while (this.#keys.size >= this.#maxKeys) {
      // One live iterator, not a fresh `entries()` per eviction: a fresh one walks past every entry
      // deleted from the front since the map last compacted, O(maxKeys) per insertion once full
      // (a flood of new clients would cost milliseconds each). Past the end, it starts over.
      let next = this.#clockHand.next();
      if (next.done === true) next = (this.#clockHand = this.#keys.entries()).next();
      const [oldestKey, oldestRef] = next.value as [string, number];
      this.#keys.delete(oldestKey);
      const layout = this.#layouts[oldestRef & LAYOUT_MASK]!;
      const mark = (oldestRef >>> LAYOUT_BITS) * layout.width + 1;
      if (layout.data[mark] === 1) {
        layout.data[mark] = 0;
        this.#keys.set(oldestKey, oldestRef);
      } else {
        this.#release(oldestRef);
      }
    }
  }

  #release(ref: number): void {
    const layout = this.#layouts[ref & LAYOUT_MASK]!;
    const slot = ref >>> LAYOUT_BITS;
    for (const offset of layout.logOffsets) {
      const index = layout.data[slot * layout.width + offset]!;
      if (index > 0) {
        this.#logs[index - 1] = undefined;
        this.#freeLogs.push(index - 1);
      }
    }
    layout.free.push(slot);
  }

  #layout(set: PolicySet): Layout {
    if (set === this.#lastSet) return this.#lastLayout!;
    let layout = this.#layoutBySet.get(set);
    if (layout === undefined) {
      const signature = set.policies.map((p) => p.kind).join(",");
      layout = this.#layoutBySignature.get(signature);
      if (layout === undefined) {
        if (this.#layouts.length >= LAYOUTS) {
          throw new FloodgateError(
            "INVALID_ARGUMENT",
            `memoryStore(): more than ${LAYOUTS} combinations of policy kinds in one store; use more stores.`,
          );
        }
        layout = new Layout(this.#layouts.length, set);
        this.#layouts.push(layout);
        this.#layoutBySignature.set(signature, layout);
      }
      this.#layoutBySet.set(set, layout);
    }
    this.#lastSet = set;
    this.#lastLayout = layout;
    return layout;
  }

  #fullKey(prefix: string, key: string): string {
    if (prefix === this.#lastPrefix) return this.#lastNamespace === "" ? key : this.#lastNamespace + key;
    let namespace = this.#namespaces.get(prefix);
    if (namespace === undefined) {
      // Keys may not start with NUL (the limiter rejects them), so no key of one namespace can spell another's.
      namespace = this.#namespaces.size === 0 ? "" : `\u0000${this.#namespaces.size}\u0000`;
      this.#namespaces.set(prefix, namespace);
    }
    this.#lastPrefix = prefix;
    this.#lastNamespace = namespace;
    return namespace === "" ? key : namespace + key;
  }
}
