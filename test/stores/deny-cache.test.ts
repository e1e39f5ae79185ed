/**
 * The deny cache as a wrapper any store can use: the compare-and-set example store, which has no
 * cache of its own, wrapped in `withDenyCache` from the store authors' entry.
 */
import { describe, expect, it } from "vitest";
import { concurrency, createRateLimiter, type Decision, fixedWindow, memoryStore, tokenBucket } from "../../packages/core/src/index.ts";
import { FloodgateError, type PolicySet, type RateLimitStore, withDenyCache } from "../../packages/core/src/stores/index.ts";
import { KINDS } from "../support/kinds.ts";
import { type CompareAndSetKV, kvStore } from "../../examples/custom-store/kv-store.ts";
import { VersionedMap } from "../../examples/custom-store/versioned-map.ts";
import { hourly, storeContract, uniquePrefix } from "./store-contract.ts";

const T0 = 1_700_000_000_000;

/** A database that counts the reads it serves: every operation of the store starts with one. */
function countingKV(): CompareAndSetKV & { reads: number } {
  const map = new VersionedMap();
  const kv = {
    reads: 0,
    get: (key: string) => {
      kv.reads++;
      return map.get(key);
    },
    setIf: (key: string, version: number, value: string | undefined, expiresAtMs: number) => map.setIf(key, version, value, expiresAtMs),
    delete: (key: string) => map.delete(key),
  };
  return kv;
}

/** What a decision says, whoever answered it. */
const figures = (d: Decision) => ({ allowed: d.allowed, remaining: d.remaining, resetAt: d.resetAt, retryAfterMs: d.retryAfterMs });

// One database for every store instance the suite makes (its racing clients share it), each in a cache of its own.
storeContract("kvStore in withDenyCache", async () => {
  const db = new VersionedMap();
  return { store: () => withDenyCache(kvStore(db)), close: async () => undefined };
});

describe("withDenyCache over a store without a cache of its own", () => {
  it("answers a known denial with no store call, counting its wait down, as the store would answer it", async () => {
    let now = T0;
    const kv = countingKV();
    const store = withDenyCache(kvStore(kv));
    const prefix = uniquePrefix();
    const policy = fixedWindow({ limit: 3, window: "1h" });
    const limiter = createRateLimiter({ policy, store, prefix, clock: () => now });
    const bare = createRateLimiter({ policy, store: kvStore(kv), prefix, clock: () => now });
    for (let i = 0; i < 3; i++) expect((await limiter.limit("k")).allowed).toBe(true);
    const first = await limiter.limit("k");
    expect([first.allowed, first.source]).toEqual([false, "store"]);
    expect(store.deniedKeys).toBe(1);
    for (let i = 0; i < 5; i++) {
      now += 1000;
      const reads = kv.reads;
      const cached = await limiter.limit("k");
      expect(kv.reads).toBe(reads); // no store call
      expect(cached.source).toBe("cache");
      expect(cached.retryAfterMs).toBe(first.retryAfterMs - 1000 * (i + 1));
      expect(figures(cached)).toEqual(figures(await bare.limit("k"))); // what the store says
    }
    // A larger cost has its own wait, and another key its own state: the store decides.
    const reads = kv.reads;
    expect((await limiter.limit("k", { cost: 2 })).source).toBe("store");
    expect((await limiter.limit("other")).source).toBe("store");
    expect(kv.reads).toBe(reads + 2);
  });

  it.each(KINDS)("decides every request as the bare store does, and charges the same: %s", async (kind) => {
    let now = T0;
    const cachedKv = countingKV();
    const policy = hourly(kind, 4);
    const cached = createRateLimiter({ policy, store: withDenyCache(kvStore(cachedKv)), prefix: "p:", clock: () => now });
    const bare = createRateLimiter({ policy, store: kvStore(new VersionedMap()), prefix: "p:", clock: () => now });
    let local = 0;
    // Bursts on two keys, costs rising within a burst (a cached denial answers the same cost or more).
    for (let i = 0; i < 120; i++) {
      now += i % 6 === 0 ? 540_000 : 1_000;
      const key = `k${Math.floor(i / 6) % 2}`;
      const cost = [1, 1, 1, 2, 2, 3][i % 6]!;
      const [a, b] = [await cached.limit(key, { cost }), await bare.limit(key, { cost })];
      expect(a.allowed, `request ${i}`).toBe(b.allowed);
      if (a.source === "cache") local++;
      else expect(figures(a), `request ${i}`).toEqual(figures(b));
    }
    expect(local).toBeGreaterThan(0);
    for (const key of ["k0", "k1"]) expect(figures(await cached.peek(key))).toEqual(figures(await bare.peek(key)));
  });

  it.each(["refund", "reset", "settle"] as const)("%s through the wrapper clears the key's denial: the store admits again", async (op) => {
    const now = T0;
    const kv = countingKV();
    const store = withDenyCache(kvStore(kv));
    const limiter = createRateLimiter({ policy: fixedWindow({ limit: 1, window: "1h" }), store, prefix: uniquePrefix(), clock: () => now });
    let undo: () => Promise<unknown>;
    if (op === "settle") {
      const reservation = await limiter.reserve("k");
      expect(reservation.decision.allowed).toBe(true);
      undo = () => reservation.cancel();
    } else {
      const admitted = await limiter.limit("k");
      expect(admitted.allowed).toBe(true);
      undo = () => (op === "refund" ? limiter.refund("k", { charge: admitted.charge }) : limiter.reset("k"));
    }
    expect((await limiter.limit("k")).source).toBe("store");
    expect((await limiter.limit("k")).source).toBe("cache");
    expect(store.deniedKeys).toBe(1);
    await undo();
    expect(store.deniedKeys).toBe(0);
    const again = await limiter.limit("k");
    expect([again.allowed, again.source]).toEqual([true, "store"]);
  });

  it("a penalty, a block and an unblock through the wrapper clear the key's denial too", async () => {
    const now = T0;
    const store = withDenyCache(kvStore(new VersionedMap()));
    const limiter = createRateLimiter({ policy: fixedWindow({ limit: 1, window: "1h" }), store, prefix: uniquePrefix(), clock: () => now });
    await limiter.limit("k");
    for (const op of [() => limiter.penalty("k"), () => limiter.block("k", "2h"), () => limiter.unblock("k")]) {
      await limiter.limit("k");
      expect(store.deniedKeys).toBe(1);
      await op();
      expect(store.deniedKeys).toBe(0);
    }
  });

  it("never caches a set with a concurrency policy: its units come back as holders settle, in any process", async () => {
    const now = T0;
    const kv = countingKV();
    const store = withDenyCache(kvStore(kv));
    const prefix = uniquePrefix();
    const policy = concurrency({ limit: 1, timeout: "1m" });
    const limiter = createRateLimiter({ policy, store, prefix, clock: () => now });
    const other = createRateLimiter({ policy, store: kvStore(kv), prefix, clock: () => now }); // another process
    const held = await other.reserve("k");
    expect(held.decision.allowed).toBe(true);
    for (let i = 0; i < 3; i++) {
      const reads = kv.reads;
      const denied = await limiter.reserve("k");
      expect([denied.decision.allowed, denied.decision.source]).toEqual([false, "store"]);
      expect(kv.reads).toBeGreaterThan(reads);
    }
    expect(store.deniedKeys).toBe(0);
    await held.settle(1); // released there: admitted here at once
    expect((await limiter.reserve("k")).decision.allowed).toBe(true);
  });

  it("a leased limiter over the wrapper serves leases; a lease denial is answered locally until a call gives units back", async () => {
    const now = T0;
    const kv = countingKV();
    const store = withDenyCache(kvStore(kv));
    const set: PolicySet = { prefix: uniquePrefix(), policies: [fixedWindow({ limit: 10, window: "1h" })] };
    const request = { cost: 1, want: 4, lifeMs: 5000, minLifeMs: 100 };
    const lease = await store.lease!(set, "k", { ...request, id: "held" }, now);
    expect([lease[0], lease[6]]).toEqual([1, 4]);
    await kvStore(kv).consume(set, "k", 5, now); // another process takes the rest
    const denied = await store.lease!(set, "k", { ...request, id: "d1" }, now);
    expect(denied[0]).toBe(0);
    expect(denied.at(-1)).not.toBe(0); // from the store: its time
    const reads = kv.reads;
    const local = await store.lease!(set, "k", { ...request, id: "d2" }, now);
    expect([local.length, local[0], local.at(-1)]).toEqual([denied.length, 0, 0]); // the cache: time 0
    expect(kv.reads).toBe(reads);
    // Giving the held lease back is sent, and its units admit the request.
    const back = await store.lease!(set, "k", { ...request, want: 0, id: "d3", returns: [{ id: "held", unspent: 4 }] }, now);
    expect(back[0]).toBe(1);
    // The limiter finds leased mode on the wrapper as on the store.
    const leased = createRateLimiter({ policy: set.policies[0]!, store, prefix: uniquePrefix(), clock: () => now, mode: "leased" });
    expect(leased.mode).toBe("leased");
  });

  it("on a store that owns its clock, measures a denial's wait on a monotonic clock, not the limiter's", async () => {
    const inner = kvStore(new VersionedMap());
    // A store reading its own clock: the limiter's (frozen here) is ignored.
    const own: RateLimitStore = {
      ...inner,
      ownsClock: true,
      consume: (set, key, cost, _nowMs, signal) => inner.consume(set, key, cost, Date.now(), signal),
      peek: (set, key, _nowMs, signal) => inner.peek(set, key, Date.now(), signal),
    };
    const store = withDenyCache(own);
    expect(store.ownsClock).toBe(true);
    const limiter = createRateLimiter({
      policy: tokenBucket({ capacity: 1, refillRate: 10 }),
      store,
      prefix: uniquePrefix(),
      clock: () => T0,
    });
    expect((await limiter.limit("k")).allowed).toBe(true);
    const denied = await limiter.limit("k");
    expect(denied.allowed).toBe(false);
    expect(denied.retryAfterMs).toBeLessThanOrEqual(100);
    expect((await limiter.limit("k")).source).toBe("cache");
    await new Promise((resolve) => setTimeout(resolve, denied.retryAfterMs + 20));
    // With the limiter's frozen time the entry would never expire: the store is asked, and admits.
    const later = await limiter.limit("k");
    expect([later.allowed, later.source]).toEqual([true, "store"]);
  });

  it("keeps at most maxKeys identifiers, the oldest out first", async () => {
    const kv = countingKV();
    const store = withDenyCache(kvStore(kv), { maxKeys: 2 });
    const limiter = createRateLimiter({ policy: fixedWindow({ limit: 1, window: "1h" }), store, prefix: uniquePrefix(), clock: () => T0 });
    for (const key of ["a", "b", "c"]) {
      await limiter.limit(key);
      await limiter.limit(key);
    }
    expect(store.deniedKeys).toBe(2);
    expect((await limiter.limit("a")).source).toBe("store");
    expect((await limiter.limit("c")).source).toBe("cache");
    await store.dispose();
    expect(store.deniedKeys).toBe(0);
  });

  it("offers exactly the operations the store has, and passes its name and clock through", () => {
    const minimal: RateLimitStore = {
      name: "minimal",
      consume: () => [1, 1, 0, 0, 0, 0],
      peek: () => [1, 1, 0, 0, 0],
      refund: () => undefined,
      reset: () => undefined,
    };
    const wrapped = withDenyCache(minimal);
    for (const op of ["reserve", "settle", "lease", "penalty", "block", "unblock"] as const) expect(wrapped[op]).toBeUndefined();
    expect([wrapped.name, wrapped.ownsClock, wrapped.inner]).toEqual(["minimal", false, minimal]);
    // So a limiter reports what the store cannot do, as it would without the wrapper.
    expect(() => createRateLimiter({ policy: fixedWindow({ limit: 1, window: "1h", block: "1h" }), store: wrapped })).toThrow(/no `block`/);
    const full = withDenyCache(kvStore(new VersionedMap()));
    for (const op of ["reserve", "settle", "lease", "penalty", "block", "unblock"] as const) expect(typeof full[op]).toBe("function");
    // A store answering synchronously still does through the wrapper (the limiter then puts no deadline around it).
    expect(full.synchronous).toBeUndefined();
    expect(withDenyCache(memoryStore()).synchronous).toBe(true);
  });

  it("refuses what is not a store, and a bad maxKeys, with a FloodgateError naming what is accepted", () => {
    expect(() => withDenyCache(null as unknown as RateLimitStore)).toThrow(FloodgateError);
    expect(() => withDenyCache({} as RateLimitStore)).toThrow(/expected a store/);
    expect(() => withDenyCache({ name: "half", consume: () => [1, 1, 0, 0, 0] } as unknown as RateLimitStore)).toThrow(
      /consume, peek, refund and reset/,
    );
    expect(() => withDenyCache(kvStore(new VersionedMap()), { maxKeys: 0 })).toThrow(/maxKeys.*a whole number from 1 to 10000000/);
  });
});
