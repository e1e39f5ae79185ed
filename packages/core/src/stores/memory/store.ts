import { FIELDS_PER_POLICY, markOf, toMicros } from "../../algorithms/algorithm.ts";
import { blockFor, overrideBlocked, penalize } from "../block.ts";
import type { Policy } from "../../policy.ts";
import type { HeldReservation, ManyCall, PolicySet, StoreResult } from "../store.ts";
import { consumeAll } from "./compound.ts";
import { nextSerial } from "../ids.ts";
import { Ledger, LedgerRecord } from "./ledger.ts";
import { BLOCKED, HEADER, type Layout, LAYOUT_BITS, LAYOUT_MASK, Layouts, Namespaces } from "./layout.ts";
import type { MemoryStore } from "./types.ts";

/** The memory store: see memory-store.ts. */
export class MemoryStoreImpl implements MemoryStore {
  readonly name = "memory" as const;
  readonly ownsClock = false;
  readonly synchronous = true;
  /** Full key → slot × LAYOUTS + layout id, in (approximate) least-recently-used order. */
  #keys = new Map<string, number>();
  #layouts = new Layouts();
  readonly #namespaces = new Namespaces();
  /** Sliding logs; a slot holds a log's index + 1 (every tracked key's logs are created with it, in #adopt). */
  #logs: (number[] | undefined)[] = [];
  #freeLogs: number[] = [];
  /**
   * Where eviction goes on from: the CLOCK hand over `#keys`, oldest first. Made at the first
   * eviction, not before: a live iterator keeps every table the map has outgrown since its last
   * step (V8 moves it to the new table only then), which while the map fills doubled its memory.
   */
  #clockHand: MapIterator<[string, number]> | undefined;
  #sinceSweep: number;
  /** Outstanding reservations (see ledger.ts). */
  readonly #ledger: Ledger;
  readonly #maxKeys: number;
  readonly #sweepEvery: number;
  constructor(maxKeys: number, maxReservations: number) {
    this.#maxKeys = maxKeys;
    this.#ledger = new Ledger(maxReservations);
    this.#sweepEvery = Math.max(1, maxKeys >> 3);
    this.#sinceSweep = this.#sweepEvery;
  }

  get size(): number {
    return this.#keys.size;
  }

  get reservations(): number {
    return this.#ledger.live;
  }

  reserve(set: PolicySet, key: string, cost: number, nowMs: number, id: string, ttlMs: number): StoreResult {
    const record = this.reserveHeld(set, key, cost, nowMs, ttlMs);
    if (Array.isArray(record)) return record as StoreResult;
    (record as LedgerRecord).given = id;
    this.#ledger.name(record as LedgerRecord, id);
    return (record as LedgerRecord).result;
  }

  settle(set: PolicySet, key: string, id: string, actual: number, nowMs: number): boolean {
    const record = this.#ledger.get(id);
    // Another key's id settles nothing (nor is it spent).
    if (record === undefined || record.key !== this.#namespaces.fullKey(set.prefix, key)) return false;
    return this.settleRecord(set, record, actual, nowMs);
  }

  reserveHeld(set: PolicySet, key: string, cost: number, nowMs: number, ttlMs: number): StoreResult | HeldReservation {
    const result = this.#decide(set, key, cost, nowMs, true);
    if (result[0] !== 1) return result;
    this.#ledger.makeRoom(toMicros(nowMs));
    const record = new LedgerRecord(
      this,
      set,
      this.#namespaces.fullKey(set.prefix, key),
      cost,
      result,
      1 + set.policies.length * FIELDS_PER_POLICY,
      toMicros(nowMs + ttlMs),
      nextSerial(),
    );
    this.#ledger.add(record);
    return record;
  }

  /** Settles a record of this store (of the key its handle was reserved under). */
  settleRecord(set: PolicySet, record: LedgerRecord, actual: number, nowMs: number): boolean {
    if (!record.live) return false;
    this.#ledger.drop(record);
    const now = toMicros(nowMs);
    // Past its ttl, a reservation counts as its estimate (as if swept at once).
    if (record.expiresAtUs <= now) return false;
    const layout = this.#layouts.of(set);
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

  consume(set: PolicySet, key: string, cost: number, nowMs: number): StoreResult {
    return this.#decide(set, key, cost, nowMs, true);
  }

  peek(set: PolicySet, key: string, nowMs: number): StoreResult {
    return this.#decide(set, key, 1, nowMs, false);
  }

  /** A compound step (see memory/compound.ts): synchronous, so nothing runs between its parts. */
  consumeMany(calls: readonly ManyCall[], cost: number, nowMs: number): StoreResult[] {
    return consumeAll(this, (set, key, charge) => this.#decide(set, key, cost, nowMs, charge), calls, cost, nowMs);
  }

  refund(set: PolicySet, key: string, cost: number, nowMs: number, marks?: readonly number[]): void {
    const layout = this.#layouts.of(set);
    const fullKey = this.#namespaces.fullKey(set.prefix, key);
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
    const fullKey = this.#namespaces.fullKey(set.prefix, key);
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
    const layout = this.#layouts.of(set);
    const ref = this.#keys.get(this.#namespaces.fullKey(set.prefix, key));
    if (ref !== undefined && (ref & LAYOUT_MASK) === layout.id) layout.data[(ref >>> LAYOUT_BITS) * layout.width + BLOCKED] = 0;
  }

  /** This key's slot in this set, created empty when it has none (as a charge would). */
  #slot(set: PolicySet, key: string, now: number): { layout: Layout; base: number } {
    const layout = this.#layouts.of(set);
    const fullKey = this.#namespaces.fullKey(set.prefix, key);
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
    this.#ledger.clear();
    this.#clockHand = undefined;
    this.#layouts = new Layouts();
    this.#logs = [];
    this.#freeLogs = [];
  }

  #decide(set: PolicySet, key: string, cost: number, nowMs: number, charge: boolean): StoreResult {
    const layout = this.#layouts.of(set);
    const fullKey = this.#namespaces.fullKey(set.prefix, key);
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
          out[5] = markOf(algorithm, policies[0]!, data, base + HEADER, log);
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
    for (let p = 0; p < count; p++) out.push(markOf(layout.algorithms[p]!, policies[p]!, data, base + layout.offsets[p]!, logs?.[p]));
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
        const layout = this.#layouts.byId[ref & LAYOUT_MASK]!;
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
      let next = this.#clockHand?.next();
      if (next === undefined || next.done === true) next = (this.#clockHand = this.#keys.entries()).next();
      const [oldestKey, oldestRef] = next.value as [string, number];
      this.#keys.delete(oldestKey);
      const layout = this.#layouts.byId[oldestRef & LAYOUT_MASK]!;
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
    const layout = this.#layouts.byId[ref & LAYOUT_MASK]!;
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
}
