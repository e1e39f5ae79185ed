import { FIELDS_PER_POLICY } from "../algorithms/algorithm.ts";
import type { Decision } from "../limiter/types.ts";
import type { LeaseRequest, PolicySet, RateLimitStore, StoreResult } from "../stores/store.ts";
import { type KeyLeases, type Lease, monotonic, newId, newKeyLeases } from "./key-state.ts";
import { leaseHorizonMs } from "./rules.ts";

/*
 * Leased mode, the instance's side (docs/leases.md). An admitted request may bring a lease: units
 * charged to every policy in the same atomic store call. This instance then admits from it with no
 * store call while units remain and both its monotonic and its wall clock are before the lease's
 * deadline: the lease's life as the store gave it, measured from before the call was sent, less a
 * margin. Unspent units go back with the next store call (or `flush()`), once, into what the lease
 * was charged in. Sizing (how much to ask for) changes how many store calls are saved, never what
 * is admitted: every unit spent here was charged in the store before.
 */

/** Default look-ahead and longest life of a lease, ms. */
export const DEFAULT_LEASE_MS = 5000;

/** The deadline margin: a fixed part (ms) for clocks that advance only on I/O... */
export const LEASE_MARGIN_MS = 5;
/** ...and a share of the lease's life for clock-rate drift (1%: ten times a 0.1%-slow clock). */
export const LEASE_DRIFT = 0.01;
/** The fewest units worth leasing: what an instance expects to spend in a lease's life. */
const MIN_LEASE = 2;
/** Most a lease request is multiplied by after leases that ran out early. */
const MAX_MULTIPLIER = 2;
/** Keys with lease state one limiter keeps; the oldest is dropped first (its units stay charged). */
const MAX_KEYS = 10_000;

/** What the leased limiter needs of its limiter. */
export interface LeaseDeps {
  readonly store: RateLimitStore;
  readonly set: PolicySet;
  readonly clock: () => number;
  /** The store reads time itself: check the monotonic clock too. */
  readonly ownsClock: boolean;
  readonly lifeMs: number;
  /** The longest a decision waits on a store call another decision made (the store's deadline), ms. */
  readonly waitMs: number;
  /** Builds a decision from flat figures (and marks, when charged), as the limiter does. */
  toDecision(result: StoreResult, cost: number): Decision;
  /** Makes `refresh` the decision's `pending`. */
  setPending(decision: Decision, refresh: Promise<void>): void;
}

/** The margin kept before a lease's end: see {@link LEASE_MARGIN_MS} and {@link LEASE_DRIFT}. */
export const leaseMargin = (lifeMs: number): number => LEASE_MARGIN_MS + LEASE_DRIFT * lifeMs;

/** The leased side of one limiter: `limit` (a decision, synchronous when served from a lease) and `flush`. */
export interface LeasedDecider {
  decide(key: string, cost: number): Decision | Promise<Decision>;
  flush(): Promise<void>;
  /**
   * Stops spending this instance's leases of `key` (after a block or a reset of it): their
   * unspent units go back with the next store call, which decides the key on the store.
   */
  drop(key: string): void;
}

/** Makes the leased side of a limiter. */
export function leasedDecider(deps: LeaseDeps): LeasedDecider {
  const { store, set, clock, ownsClock, lifeMs } = deps;
  const count = set.policies.length;
  const figures = 1 + count * FIELDS_PER_POLICY;
  const minLifeMs = 2 * leaseMargin(lifeMs) + 1;
  /** The longest a lease of this set can live: `lifeMs`, or a window's length if shorter. */
  const horizonMs = leaseHorizonMs(set.policies, lifeMs);
  const keys = new Map<string, KeyLeases>();

  const usable = (lease: Lease | undefined, cost: number): boolean =>
    lease !== undefined && lease.units >= cost && clock() < lease.deadlineWall && (!ownsClock || monotonic() < lease.deadlineMono);

  /** Moves a spent or expired lease out; its unspent units go back with a later call. */
  const retire = (k: KeyLeases, lease: Lease): void => {
    const expired = !(clock() < lease.deadlineWall && (!ownsClock || monotonic() < lease.deadlineMono));
    // Ran out early: with more than a quarter of its life left (a lease sized for the rate runs
    // out near its deadline about half the time; that is no reason to double).
    const early = !expired && lease.deadlineWall - clock() > (lease.deadlineWall - lease.sentWall) / 4;
    if (early) k.multiplier = Math.min(MAX_MULTIPLIER, k.multiplier * 2);
    else if (expired && lease.units * 2 > lease.granted) k.multiplier = Math.max(1, k.multiplier / 2);
    // Even a spent lease goes back (with nothing to give): its ledger record is then deleted, so
    // records left in the store are exactly the leases never returned (those of dead instances).
    k.returns.push({ id: lease.id, unspent: lease.units });
    lease.units = 0;
  };

  /** Stops spending `k`'s leases: their unspent units go back with the next store call. */
  const giveBack = (k: KeyLeases): void => {
    for (const lease of [k.current, k.next]) {
      if (lease !== undefined) k.returns.push({ id: lease.id, unspent: lease.units });
      if (lease !== undefined) lease.units = 0;
    }
    k.current = k.next = undefined;
  };

  /** The lease to spend from now, moving on from a spent or expired one. */
  const take = (k: KeyLeases, cost: number): Lease | undefined => {
    for (;;) {
      const lease = k.current;
      if (usable(lease, cost)) return lease;
      if (lease === undefined && k.next === undefined) return undefined;
      if (lease !== undefined) retire(k, lease);
      k.current = k.next;
      k.next = undefined;
    }
  };

  const stateOf = (key: string): KeyLeases => {
    let k = keys.get(key);
    if (k === undefined) {
      if (keys.size >= MAX_KEYS) keys.delete(keys.keys().next().value as string);
      k = newKeyLeases();
      keys.set(key, k);
    }
    return k;
  };

  /** Units to ask for: this instance's rate over the look-ahead, times the run-out multiplier. */
  const wantOf = (k: KeyLeases, cost: number): number => {
    const now = clock();
    const elapsed = now - k.lastCallAt;
    if (elapsed > 0) {
      // Units over time, each smoothed: the ratio of the averages, not the average of the
      // ratios, which one short gap between two requests would throw far off.
      k.servedAvg = k.rate < 0 ? k.servedSince : (k.servedAvg + k.servedSince) / 2;
      k.elapsedAvg = k.rate < 0 ? elapsed : (k.elapsedAvg + elapsed) / 2;
      k.rate = (k.servedAvg * 1000) / k.elapsedAvg;
    }
    k.lastCallAt = now;
    k.servedSince = 0;
    // No lease before a rate is measured, nor one this instance would spend fewer than MIN_LEASE
    // units of in the longest life a lease can have (a window's length cuts it): on a key this
    // instance sees only a few times per lease, leasing saves little and parks units.
    if (k.rate < 0 || (k.rate * horizonMs) / 1000 < MIN_LEASE) return 0;
    const base = Math.ceil((k.rate * lifeMs) / 1000);
    return Math.min(1e12, Math.max(cost, base) * k.multiplier);
  };

  /** Remaining per policy as a hint that never grows within one reset. */
  const hintOf = (k: KeyLeases, p: number, value: number, resetAt: number): number => {
    if (k.hintReset[p] === resetAt && k.hint[p]! < value) return k.hint[p]!;
    k.hint[p] = value;
    k.hintReset[p] = resetAt;
    return value;
  };

  const fromLease = (k: KeyLeases, lease: Lease, cost: number): Decision => {
    const out: number[] = [1];
    for (let p = 0; p < count; p++) {
      out.push(1, hintOf(k, p, lease.remaining[p]! + lease.units, lease.resetAt[p]!), lease.resetAt[p]!, 0);
    }
    for (const m of lease.marks) out.push(m);
    const decision = deps.toDecision(out, cost) as Decision & { source: string };
    decision.source = "lease";
    return decision;
  };

  /** Installs a granted lease from a store answer sent at (sentMono, sentWall). */
  const install = (k: KeyLeases, result: StoreResult, id: string, sentMono: number, sentWall: number): void => {
    const g = result[figures + count]!;
    if (!(g > 0)) return;
    const granted = result[figures + count + 1]! / 1000;
    const life = granted - leaseMargin(lifeMs);
    const remaining: number[] = [];
    const resetAt: number[] = [];
    for (let p = 0; p < count; p++) {
      remaining.push(result[2 + p * FIELDS_PER_POLICY]!);
      resetAt.push(result[3 + p * FIELDS_PER_POLICY]!);
    }
    const lease: Lease = {
      id,
      units: g,
      granted: g,
      sentWall,
      deadlineMono: sentMono + life,
      deadlineWall: sentWall + life,
      cut: granted < lifeMs,
      marks: result.slice(figures, figures + count),
      remaining,
      resetAt,
    };
    if (k.current !== undefined && k.current.units === 0) {
      // Spent: it goes back (with nothing to give) so that its ledger record goes too.
      retire(k, k.current);
      k.current = k.next;
      k.next = undefined;
    }
    if (k.current === undefined) k.current = lease;
    else if (k.next === undefined) k.next = lease;
    else {
      // Two live leases already (an answer raced a refresh): this one goes back at once.
      k.returns.push({ id, unspent: g });
      lease.units = 0;
    }
  };

  const call = (k: KeyLeases, key: string, cost: number, want: number): Promise<StoreResult> => {
    // Every pending return rides along (they cost the script a GET and a DEL each).
    const returns = k.returns.splice(0);
    const id = newId();
    const request: LeaseRequest = returns.length === 0
      ? { cost, want, lifeMs, minLifeMs, id }
      : { cost, want, lifeMs, minLifeMs, id, returns };
    const sentMono = monotonic();
    const sentWall = clock();
    let abandoned = false;
    const pending = Promise.resolve(store.lease!(set, key, request, sentWall)).then(
      (result) => {
        if (abandoned) {
          // Given up on (awaitCall): its returns were queued again; a lease it brought goes back whole.
          if (result[figures + count]! > 0) k.returns.push({ id, unspent: Number.MAX_SAFE_INTEGER });
          return result;
        }
        if (result[result.length - 1] === 0) {
          // Answered by the deny cache, which sends nothing: the returns go with a later call.
          if (returns.length > 0) k.returns.unshift(...returns);
          return result;
        }
        const rtt = Math.max(0, clock() - sentWall);
        k.rttMs = k.rttMs === 0 ? rtt : (k.rttMs + rtt) / 2;
        install(k, result, id, sentMono, sentWall);
        return result;
      },
      (error: unknown) => {
        // The returns may or may not have run: sent again, they give back nothing twice (the
        // records are gone). The failed call itself may have charged a lease no one holds: it
        // goes back whole with the next call, by its id (nothing, if it never ran).
        if (!abandoned) k.returns.unshift(...returns, { id, unspent: Number.MAX_SAFE_INTEGER });
        throw error;
      },
    );
    k.inflight = pending;
    k.inflightSent = sentMono;
    const clear = (): void => {
      if (k.inflight === pending) k.inflight = undefined;
    };
    k.abandon = () => {
      abandoned = true;
      clear();
      k.returns.unshift(...returns, { id, unspent: Number.MAX_SAFE_INTEGER });
    };
    pending.then(clear, clear);
    return pending;
  };

  /**
   * Waits for the store call in flight on `k`, on a timer of the waiting decision's own, at most
   * until the store's deadline after the call was sent. The decision that made the call may be
   * gone with its I/O (a Worker's request ends with its response, or when its client leaves), and
   * its call then never settles: past the deadline it is given up on, as a failed call is (what it
   * carried and the lease it may have brought go back with the next call), and the waiter calls
   * the store itself.
   */
  const awaitCall = (k: KeyLeases): Promise<void> => {
    const inflight = k.inflight!;
    return new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        if (k.inflight === inflight) k.abandon();
        resolve();
      }, Math.max(0, k.inflightSent + deps.waitMs - monotonic()));
      const done = (): void => {
        clearTimeout(timer);
        resolve();
      };
      inflight.then(done, done);
    });
  };

  /** A lease asked for in the background; none when no lease is worth asking for and nothing is to go back. */
  const refresh = (k: KeyLeases, key: string, cost: number): Promise<void> | undefined => {
    const want = wantOf(k, cost);
    if (want === 0 && k.returns.length === 0) return undefined;
    return call(k, key, 0, want).then(() => undefined, () => undefined);
  };

  /**
   * Whether to ask for the next lease now, in the background: when what the lease can still serve
   * (its units, or its rate times the life it has left) would not last two more requests and a
   * round trip (nor an eighth of the lease). Any earlier, and the next lease's life would start
   * while this one still serves, which costs store calls; any later, and a request waits for the
   * store.
   */
  const dueForRefresh = (k: KeyLeases, lease: Lease, cost: number): boolean => {
    if (k.next !== undefined || k.inflight !== undefined) return false;
    // A lease exists only once a rate above zero was measured (wantOf), and it stays above zero.
    const perMs = k.rate / 1000;
    // Never more than an eighth of the lease: an instance that sees a key a few times per lease
    // would otherwise refresh halfway through each one.
    const threshold = Math.min(2 * cost + perMs * k.rttMs, lease.granted / 8);
    const left = lease.deadlineWall - clock();
    // A lease cut short by its window's end: a refresh would end there too, so it is worth a call
    // only with a good part of a lease's life to go (else the next window's first request asks).
    if (lease.cut && left < lifeMs / 4) return false;
    return lease.units < threshold || perMs * left < threshold;
  };

  const fromStore = (k: KeyLeases, result: StoreResult, cost: number): Decision => {
    const admitted = result[0] === 1;
    const figuresOnly = result.slice(0, figures);
    if (admitted) {
      for (let p = 0; p < count; p++) {
        const i = 2 + p * FIELDS_PER_POLICY;
        figuresOnly[i] = hintOf(k, p, result[i]! + (k.current?.units ?? 0), result[i + 1]!);
      }
    }
    const decision = deps.toDecision(admitted ? [...figuresOnly, ...result.slice(figures, figures + count)] : figuresOnly, cost) as
      & Decision
      & { source: string };
    decision.source = result[result.length - 1] === 0 ? "cache" : "store";
    return decision;
  };

  const viaStore = async (key: string, k: KeyLeases, cost: number): Promise<Decision> => {
    while (k.inflight !== undefined) {
      await awaitCall(k);
      const lease = take(k, cost);
      if (lease !== undefined) return spend(key, k, lease, cost);
    }
    const result = await call(k, key, cost, wantOf(k, cost));
    return fromStore(k, result, cost);
  };

  const spend = (key: string, k: KeyLeases, lease: Lease, cost: number): Decision => {
    lease.units -= cost;
    const decision = fromLease(k, lease, cost);
    if (dueForRefresh(k, lease, cost)) {
      const refreshing = refresh(k, key, cost);
      if (refreshing !== undefined) deps.setPending(decision, refreshing);
    }
    return decision;
  };

  return {
    decide(key: string, cost: number): Decision | Promise<Decision> {
      const k = stateOf(key);
      k.servedSince += cost;
      const lease = take(k, cost);
      if (lease !== undefined) return spend(key, k, lease, cost);
      return viaStore(key, k, cost);
    },
    drop(key: string): void {
      const k = keys.get(key);
      if (k !== undefined) giveBack(k);
    },
    async flush(): Promise<void> {
      const all: Promise<void>[] = [];
      for (const [key, k] of keys) {
        all.push((async () => {
          while (k.inflight !== undefined) await awaitCall(k);
          giveBack(k);
          // One call returns them all; a failure leaves them for a later call (and rejects flush).
          // Spent leases too: their records go, so records left are those of leases never returned.
          if (k.returns.length > 0) await call(k, key, 0, 0);
        })());
      }
      const results = await Promise.allSettled(all);
      const failed = results.find((r) => r.status === "rejected");
      if (failed !== undefined) throw (failed as PromiseRejectedResult).reason;
    },
  };
}
