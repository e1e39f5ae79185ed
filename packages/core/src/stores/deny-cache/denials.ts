import { FIELDS_PER_POLICY, NEVER } from "../../algorithms/algorithm.ts";
import { answeredLocally, type StoreResult } from "../store.ts";

interface Denial {
  /** The policy set the denial was computed for. */
  readonly set: number;
  readonly cost: number;
  /** Time (on the cache's clock) when the request was sent. */
  readonly at: number;
  /** Until this time (same clock, exclusive) the store is certain to deny `cost` or more. */
  readonly until: number;
  readonly result: StoreResult;
  /** The policies' limits, to mark a larger cost as never admissible. */
  readonly limits: readonly number[];
}

/**
 * Remembers identifiers the store denied, to answer further requests for them locally, with
 * zero store calls, while the store is certain to deny them too. Bounded (oldest entry evicted
 * first), no timers: an entry is dropped when found stale. `withDenyCache` puts it in
 * front of a store.
 *
 * Certainty: a denial with `retryAfterMs` r means the request fits no earlier than r ms after the
 * store decided (r is the exact wait rounded up to a whole ms, so the wait exceeds r − 1 ms), and
 * the store decided after the request was sent. So until `sentAt + r − 1` every request of this
 * process costing at least as much is denied too — unless another process resets or refunds
 * the identifier, which this cache cannot see. This process's own reset/refund clear the entry
 * when sent and again when done (a consume sent meanwhile may have run first), and a denial still
 * in flight when one was sent is not remembered (see `generation`).
 */
export class DenyCache {
  readonly #entries = new Map<string, Denial>();
  readonly #maxKeys: number;
  #generation = 0;

  constructor(maxKeys: number) {
    this.#maxKeys = maxKeys;
  }

  /**
   * Changes with every `forget`/`clear`. A denial whose request was sent before a change may
   * predate this process's own refund or reset of that identifier: not to be remembered.
   */
  get generation(): number {
    return this.#generation;
  }

  get size(): number {
    return this.#entries.size;
  }

  /** The locally derived denial for `cost` at `now`, or undefined when the store must decide. */
  check(key: string, set: number, cost: number, now: number): StoreResult | undefined {
    const entry = this.#entries.get(key);
    if (entry === undefined) return undefined;
    if (now >= entry.until || now < entry.at) {
      // Stale, or the clock stepped back past the denial: let the store decide.
      this.#entries.delete(key);
      return undefined;
    }
    if (entry.set !== set || cost < entry.cost) return undefined;
    const out = entry.result.slice();
    const elapsed = now - entry.at;
    let never = false;
    for (let p = 0, i = 1; p < entry.limits.length; p++, i += FIELDS_PER_POLICY) {
      if (cost > entry.limits[p]!) {
        out[i] = 0;
        out[i + 3] = NEVER;
        never = true;
      } else if (out[i] === 0 && out[i + 3] !== NEVER) {
        out[i + 3] = Math.max(1, Math.ceil(out[i + 3]! - elapsed));
      }
    }
    // A larger cost has its own, longer exact wait (a token bucket, a sliding window or log needs
    // more to free up), and with several policies a policy that admitted the smaller cost may bind
    // it: the store decides. Certain only when the cost exceeds a limit (that policy binds, never).
    if (cost > entry.cost && !never) return undefined;
    out[0] = 0;
    return answeredLocally(out, "cache");
  }

  /**
   * Records a denial of `cost` sent at `sentAt`, for at most `maxMs` when given (a leased
   * limiter's: units of outstanding leases may come back before the denial's wait is over).
   */
  remember(key: string, set: number, cost: number, sentAt: number, result: StoreResult, limits: readonly number[], maxMs?: number): void {
    let wait = 0;
    for (let i = 1; i < result.length; i += FIELDS_PER_POLICY) {
      if (result[i] !== 0) continue;
      const retry = result[i + 3]!;
      const w = retry === NEVER ? Infinity : retry - 1;
      if (w > wait) wait = w;
    }
    if (maxMs !== undefined && wait > maxMs) wait = maxMs;
    if (wait <= 0) return;
    const entries = this.#entries;
    entries.delete(key);
    if (entries.size >= this.#maxKeys) entries.delete(entries.keys().next().value as string);
    entries.set(key, { set, cost, at: sentAt, until: sentAt + wait, result, limits });
  }

  forget(key: string): void {
    this.#generation++;
    this.#entries.delete(key);
  }

  clear(): void {
    this.#generation++;
    this.#entries.clear();
  }
}
