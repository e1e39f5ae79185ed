import { type Algorithm, algorithmOf } from "../../algorithms/algorithm.ts";
import { FloodgateError } from "../../errors.ts";
import type { PolicySet } from "../store.ts";

/*
 * How the memory store lays out state: keys sharing one sequence of policy kinds share one
 * growable Float64Array, a slot per key.
 */

/** A map value packs a slot number and a layout id: slot × LAYOUTS + layout. */
export const LAYOUT_BITS = 8;
export const LAYOUTS = 1 << LAYOUT_BITS;
export const LAYOUT_MASK = LAYOUTS - 1;
export const MAX_KEYS = Math.floor(2 ** 31 / LAYOUTS) - 1;
/** Per slot, before the policies' state: expiry (µs), the used-since-passed mark (CLOCK) and the end of its block (µs, 0: none). */
export const HEADER = 3;
/** Where in a slot the end of its block is. */
export const BLOCKED = 2;

/**
 * The state of every key that shares one sequence of policy kinds, in one growable
 * Float64Array: a slot is [expiresAtUs, usedMark, blockedUntilUs, ...state of each policy].
 */
export class Layout {
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

/** Every layout of one store, by id and by policy set (the last set asked for, first). */
export class Layouts {
  readonly byId: Layout[] = [];
  #bySignature = new Map<string, Layout>();
  #bySet = new WeakMap<PolicySet, Layout>();
  #lastSet: PolicySet | undefined;
  #lastLayout: Layout | undefined;

  of(set: PolicySet): Layout {
    if (set === this.#lastSet) return this.#lastLayout!;
    let layout = this.#bySet.get(set);
    if (layout === undefined) {
      const signature = set.policies.map((p) => p.kind).join(",");
      layout = this.#bySignature.get(signature);
      if (layout === undefined) {
        if (this.byId.length >= LAYOUTS) {
          throw new FloodgateError(
            "INVALID_ARGUMENT",
            `memoryStore(): more than ${LAYOUTS} combinations of policy kinds in one store; use more stores.`,
          );
        }
        layout = new Layout(this.byId.length, set);
        this.byId.push(layout);
        this.#bySignature.set(signature, layout);
      }
      this.#bySet.set(set, layout);
    }
    this.#lastSet = set;
    this.#lastLayout = layout;
    return layout;
  }
}

/** Each namespace's key prefix in the store's one key table: the first namespace uses keys as they are. */
export class Namespaces {
  #namespaces = new Map<string, string>();
  /** Never a prefix at first (no prefix contains `{`): always a string, so comparing it stays a string compare. */
  #lastPrefix = "{";
  #lastNamespace = "";

  fullKey(prefix: string, key: string): string {
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
