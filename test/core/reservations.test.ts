/**
 * The limiter's reservation API on the memory store: argument checks, the handle's idempotence,
 * denials, `limit()` with a concurrency policy, `pending`, `flush()`, ttl defaults and bounds.
 */
import { describe, expect, it } from "vitest";
import {
  concurrency,
  createRateLimiter,
  fixedWindow,
  FloodgateError,
  memoryStore,
  type RateLimitStore,
  tokenBucket,
} from "../../packages/core/src/index.ts";

const T0 = 1_767_225_600_000;

describe("limiter.reserve()", () => {
  it("rejects bad estimates, ttls and actual costs with INVALID_ARGUMENT, naming what is accepted", async () => {
    const limiter = createRateLimiter({ policy: fixedWindow({ limit: 10, window: "1m" }) });
    for (const estimate of [0, -1, 1.5, "2", Number.MAX_SAFE_INTEGER + 2]) {
      await expect(limiter.reserve("k", { estimate: estimate as number })).rejects.toMatchObject({
        code: "INVALID_ARGUMENT",
        message: expect.stringContaining("Invalid estimate"),
      });
    }
    for (const ttl of [0, "soon", 86_400_001, "2d"]) {
      await expect(limiter.reserve("k", { ttl })).rejects.toMatchObject({
        code: "INVALID_ARGUMENT",
        message: expect.stringContaining("ttl"),
      });
    }
    const r = await limiter.reserve("k");
    for (const actual of [-1, 0.5, "1", Infinity]) {
      await expect(r.settle(actual as number)).rejects.toMatchObject({
        code: "INVALID_ARGUMENT",
        message: expect.stringContaining("actual"),
      });
    }
    await expect(limiter.settle("k", { id: "no spaces", actual: 1 })).rejects.toMatchObject({ code: "INVALID_ARGUMENT" });
    await expect(limiter.settle("k", null as never)).rejects.toMatchObject({ code: "INVALID_ARGUMENT" });
    await expect(limiter.reserve("")).rejects.toMatchObject({ code: "INVALID_ARGUMENT", message: expect.stringContaining("Invalid key") });
    // Nothing above changed the state but the one reservation.
    expect((await limiter.peek("k")).remaining).toBe(9);
    expect(await r.settle(0)).toBe(true);
    expect((await limiter.peek("k")).remaining).toBe(10);
  });

  it("a handle settles once: concurrent settles of one reservation charge once", async () => {
    const limiter = createRateLimiter({ policy: fixedWindow({ limit: 100, window: "1m" }) });
    const r = await limiter.reserve("k", { estimate: 10 });
    const answers = await Promise.all([r.settle(30), r.settle(30), r.cancel(), limiter.settle("k", { id: r.id, actual: 30 })]);
    expect(answers).toEqual([true, false, false, false]);
    expect((await limiter.peek("k")).remaining).toBe(70);
  });

  it("another key's id settles nothing", async () => {
    const limiter = createRateLimiter({ policy: fixedWindow({ limit: 100, window: "1m" }) });
    const r = await limiter.reserve("a", { estimate: 10 });
    expect(await limiter.settle("b", { id: r.id, actual: 0 })).toBe(false);
    expect(await limiter.settle("a", { id: r.id, actual: 0 })).toBe(true);
  });

  it("an id settles by limiter.settle() whether it was read before or after the handle was used; only its exact spelling", async () => {
    const store = memoryStore();
    const limiter = createRateLimiter({ policy: fixedWindow({ limit: 100, window: "1m" }), store });
    const r = await limiter.reserve("k", { estimate: 10 });
    const id = r.id;
    expect(r.id).toBe(id);
    expect(JSON.parse(JSON.stringify(r)).id).toBe(id);
    const [prefix, serial] = [id.slice(0, id.lastIndexOf("_") + 1), id.slice(id.lastIndexOf("_") + 1)];
    expect(serial).toMatch(/^[1-9][0-9]*$/);
    for (const other of [`${prefix}0${serial}`, `${prefix}${serial}0`, `x${id}`]) {
      expect(await limiter.settle("k", { id: other, actual: 0 })).toBe(false);
    }
    expect(store.reservations).toBe(1);
    expect(await limiter.settle("k", { id, actual: 4 })).toBe(true);
    expect(await r.settle(0)).toBe(false);
    expect((await limiter.peek("k")).remaining).toBe(96);
    // Another limiter over the same store settles it by id as well; and an id made elsewhere is recorded as it is.
    const s = await limiter.reserve("k", { estimate: 10 });
    const t = await limiter.reserve("k", { estimate: 10 });
    const other = createRateLimiter({ policy: fixedWindow({ limit: 100, window: "1m" }), store });
    expect(await other.settle("k", { id: t.id, actual: 0 })).toBe(true);
    expect(await t.cancel()).toBe(false);
    expect(await s.settle(10)).toBe(true);
    const set = { prefix: "fg:", policies: [fixedWindow({ limit: 100, window: "1m" })] };
    expect(store.reserve(set, "j", 3, Date.now(), "made-elsewhere_1", 60_000)[0]).toBe(1);
    expect(store.settle(set, "j", "made-elsewhere_1", 1, Date.now())).toBe(true);
    expect(store.settle(set, "j", "made-elsewhere_1", 1, Date.now())).toBe(false);
    expect(store.reservations).toBe(0);
  });

  it("limit() and decide() refuse a limiter with a concurrency policy; peek() reports it", async () => {
    const limiter = createRateLimiter({ policy: [tokenBucket({ capacity: 5, refillRate: 1 }), concurrency({ limit: 2 })] });
    await expect(limiter.limit("k")).rejects.toMatchObject({
      code: "INVALID_ARGUMENT",
      message: expect.stringContaining("limiter.reserve(key)"),
    });
    expect(() => limiter.decide("k")).toThrow(FloodgateError);
    await limiter.reserve("k");
    expect((await limiter.peek("k")).policies.map((p) => p.remaining)).toEqual([4, 1]);
  });

  it("concurrency() validates its options and names its default", () => {
    expect(concurrency({ limit: 3 })).toMatchObject({ kind: "concurrency", name: "3-concurrent", limit: 3, windowMs: 60_000 });
    expect(concurrency({ limit: 3, timeout: "2m", name: "llm" })).toMatchObject({ name: "llm", windowMs: 120_000 });
    expect(() => concurrency({ limit: 0 })).toThrow(/concurrency\(\): invalid option `limit`/);
    expect(() => concurrency({ limit: 1, timeout: "forever" as never })).toThrow(/`timeout`/);
    expect(() => concurrency({ limit: 2 ** 40, timeout: "1d" })).toThrow(/limit` × `timeout` is too large/);
  });

  it("the default ttl is ten minutes, or the longest concurrency timeout; past it a settle does nothing", async () => {
    let now = T0;
    const store = memoryStore();
    const plain = createRateLimiter({ policy: fixedWindow({ limit: 10, window: "1h" }), store, clock: () => now });
    const long = createRateLimiter({
      policy: [concurrency({ limit: 5, timeout: "30m" }), fixedWindow({ limit: 10, window: "1h" })],
      store,
      clock: () => now,
      prefix: "l:",
    });
    const a = await plain.reserve("k", { estimate: 3 });
    const b = await long.reserve("k", { estimate: 3 });
    now += 600_000 - 1;
    expect(await a.settle(1)).toBe(true);
    now += 2;
    expect(await b.settle(1)).toBe(true);
    const c = await plain.reserve("k", { estimate: 3 });
    const d = await long.reserve("k", { estimate: 3 });
    now += 600_000;
    expect(await c.cancel()).toBe(false); // expired: keeps its estimate
    expect(await d.cancel()).toBe(true);
    expect((await plain.peek("k")).remaining).toBe(10 - 1 - 3);
  });

  it("decision.pending: resolved for limit(); for a reservation, once its settlement finished; flush() awaits every settlement", async () => {
    let release: (() => void) | undefined;
    const memory = memoryStore();
    // A store that answers settle asynchronously, held until released (the memory store behind it decides).
    const slow: RateLimitStore = {
      name: "slow",
      consume: (...a) => memory.consume(...a),
      peek: (...a) => memory.peek(...a),
      refund: (...a) => memory.refund(...a),
      reset: (...a) => memory.reset(...a),
      reserve: (set, key, cost, nowMs, id, ttlMs) => memory.reserve(set, key, cost, nowMs, id, ttlMs),
      settle: (...a) => new Promise<boolean>((resolve) => (release = () => resolve(memory.settle(...a)))),
    };
    const limiter = createRateLimiter({ policy: fixedWindow({ limit: 10, window: "1h" }), store: slow, resilience: false });
    await expect((await limiter.limit("k")).pending).resolves.toBeUndefined();
    const r = await limiter.reserve("k", { estimate: 4 });
    let pendingDone = false;
    void r.decision.pending.then(() => (pendingDone = true));
    let flushed = false;
    await Promise.resolve();
    expect(pendingDone).toBe(false);
    const settled = r.settle(1);
    void limiter.flush().then(() => (flushed = true));
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect([pendingDone, flushed]).toEqual([false, false]);
    release!();
    expect(await settled).toBe(true);
    await limiter.flush();
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect([pendingDone, flushed]).toEqual([true, true]);
    expect((await limiter.peek("k")).remaining).toBe(8);
    // A denial's pending is resolved at once, and its handle does nothing.
    const full = await limiter.reserve("k", { estimate: 9 });
    expect(full.decision.allowed).toBe(false);
    await expect(full.decision.pending).resolves.toBeUndefined();
    expect(await full.settle(1)).toBe(false);
  });

  it("a store without reservations: reserve() rejects with INVALID_ARGUMENT naming it", async () => {
    const memory = memoryStore();
    const bare: RateLimitStore = {
      name: "bare",
      consume: (...a) => memory.consume(...a),
      peek: (...a) => memory.peek(...a),
      refund: (...a) => memory.refund(...a),
      reset: (...a) => memory.reset(...a),
    };
    const limiter = createRateLimiter({ policy: fixedWindow({ limit: 10, window: "1h" }), store: bare });
    await expect(limiter.reserve("k")).rejects.toMatchObject({ code: "INVALID_ARGUMENT", message: expect.stringContaining("bare") });
  });

  it("the memory store keeps at most maxReservations: the oldest goes and keeps its estimate", async () => {
    const store = memoryStore({ maxReservations: 2 });
    const limiter = createRateLimiter({ policy: fixedWindow({ limit: 100, window: "1h" }), store });
    const [a, b, c] = [
      await limiter.reserve("k", { estimate: 5 }),
      await limiter.reserve("k", { estimate: 5 }),
      await limiter.reserve("k", { estimate: 5 }),
    ];
    expect(store.reservations).toBe(2);
    expect(await a!.cancel()).toBe(false);
    expect(await b!.cancel()).toBe(true);
    expect(await c!.cancel()).toBe(true);
    expect((await limiter.peek("k")).remaining).toBe(95);
    expect(store.reservations).toBe(0);
  });

  it("the memory store's ledger: settled in any order, by handle or by id, through compaction and trimming", async () => {
    const store = memoryStore({ maxReservations: 50 });
    const limiter = createRateLimiter({ policy: fixedWindow({ limit: 1e6, window: "1h" }), store });
    // One held the whole time (the oldest), while thousands come and go behind it.
    const oldest = await limiter.reserve("k", { estimate: 7 });
    const oldestId = oldest.id;
    let charged = 7;
    const held: Awaited<ReturnType<typeof limiter.reserve>>[] = [];
    for (let i = 0; i < 3000; i++) {
      held.push(await limiter.reserve("k", { estimate: 3 }));
      charged += 3;
      if (held.length > 20) {
        // Out of order: half by the handle, half by id.
        const r = held.splice(i % held.length, 1)[0]!;
        const actual = i % 5;
        if (i % 2 === 0) expect(await r.settle(actual)).toBe(true);
        else expect(await limiter.settle("k", { id: r.id, actual })).toBe(true);
        expect(await r.cancel()).toBe(false);
        charged += actual - 3;
      }
    }
    expect(store.reservations).toBe(1 + held.length);
    expect(1e6 - (await limiter.peek("k")).remaining).toBe(charged);
    for (const r of held.splice(0, 10)) {
      expect(await limiter.settle("k", { id: r.id, actual: 0 })).toBe(true);
      charged -= 3;
    }
    // Full (50): each new one sweeps the oldest live one, the first-held one first; its estimate stays.
    expect(store.reservations).toBe(11);
    const extra = [];
    for (let i = 0; i < 41; i++) extra.push(await limiter.reserve("k", { estimate: 1 }));
    expect(store.reservations).toBe(50);
    expect(await limiter.settle("k", { id: oldestId, actual: 0 })).toBe(false);
    expect(await oldest.cancel()).toBe(false);
    expect(await held[0]!.cancel()).toBe(false);
    expect(await held[1]!.cancel()).toBe(true);
    expect(await extra.at(-1)!.settle(1)).toBe(true);
    // dispose() forgets every reservation: their handles settle nothing.
    store.dispose();
    expect(store.reservations).toBe(0);
    expect(await held[2]!.cancel()).toBe(false);
  });
});
