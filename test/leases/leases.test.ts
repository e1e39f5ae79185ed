/**
 * Leased mode on the Redis stores (real redis-server, TCP and the Upstash bridge): one store call
 * brings a lease, the following decisions are served from it with no call, unspent units go back
 * into the window they were charged in, once, and the safety rules hold at their edges.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  concurrency,
  createRateLimiter,
  type Decision,
  fixedWindow,
  FloodgateError,
  memoryStore,
  slidingLog,
  slidingWindow,
  tokenBucket,
  withRateLimit,
} from "../../packages/core/src/index.ts";
import { LEASE_SCRIPT_SHA, leaseLuaScript } from "../../packages/core/src/stores/redis/lease-lua.ts";
import { createHash } from "node:crypto";
import { uniquePrefix } from "../stores/store-contract.ts";
import { ioredisHarness, type RedisHarness, upstashHarness } from "../redis/harness.ts";
import type { Redis as IORedis } from "ioredis";

const HOUR = 3_600_000;
const T0 = 1_700_002_800_000; // an hour boundary

it("the lease script's precomputed SHA1 matches its source", () => {
  expect(createHash("sha1").update(leaseLuaScript().source).digest("hex")).toBe(LEASE_SCRIPT_SHA);
});

describe.each([["ioredis", ioredisHarness], ["upstash", upstashHarness]] as const)("leased mode on %s", (_name, make) => {
  let h: RedisHarness;
  beforeAll(async () => {
    h = await make();
  });
  afterAll(async () => {
    await h?.close();
  });

  async function stored(prefix: string, key: string): Promise<number> {
    const v = await h.admin.get(`${prefix}{${key}}`);
    return v === null ? 0 : Math.floor(Number(v) / 1048576);
  }

  it("serves decisions from a lease with no store call, and flush() gives the unspent units back", async () => {
    let now = T0 + 1000;
    const prefix = uniquePrefix();
    const store = h.store("local");
    const limiter = createRateLimiter({
      policy: fixedWindow({ limit: 1000, window: HOUR }),
      store,
      prefix,
      clock: () => now,
      mode: "leased",
    });
    expect(limiter.mode).toBe("leased");
    const first = await limiter.limit("k");
    expect(first.allowed).toBe(true);
    expect(first.source).toBe("store");
    // The first call measures no rate yet: a small lease, then doubling on run-out.
    let fromStore = 1;
    let admitted = 1;
    for (let i = 0; i < 200; i++) {
      now += 10;
      const d = await limiter.limit("k");
      expect(d.allowed).toBe(true);
      expect(d.limit).toBe(1000);
      if (d.source === "store") fromStore++;
      else expect(d.source).toBe("lease");
      admitted++;
      await d.pending;
    }
    expect(fromStore).toBeLessThan(40);
    const charged = await stored(prefix, "k");
    expect(charged).toBeGreaterThanOrEqual(admitted);
    await limiter.flush();
    expect(await stored(prefix, "k")).toBe(admitted);
    // A second flush returns nothing twice.
    await limiter.flush();
    expect(await stored(prefix, "k")).toBe(admitted);
  });

  /**
   * The store, counting its lease calls, and among them the refreshes (no request, units wanted);
   * every other property, the decider's symbol too, is the store's.
   */
  function counted(store: ReturnType<RedisHarness["store"]>): { store: typeof store; calls: () => number; refreshes: () => number } {
    let n = 0;
    let refreshes = 0;
    const wrapped = new Proxy(store, {
      get(target, property, receiver) {
        const value = Reflect.get(target, property, receiver);
        if (property !== "lease" || typeof value !== "function") return value;
        return (...args: unknown[]) => {
          n++;
          const request = args[2] as { cost: number; want: number };
          if (request.cost === 0 && request.want > 0) refreshes++;
          return (value as (...a: unknown[]) => unknown).apply(target, args);
        };
      },
    });
    return { store: wrapped, calls: () => n, refreshes: () => refreshes };
  }

  /** A leased limiter (5 s leases) on the test's clock, for a key with quota to spare. */
  const roomy = (store: ReturnType<RedisHarness["store"]>, clock: () => number) =>
    createRateLimiter({
      policy: fixedWindow({ limit: 10_000_000, window: HOUR }),
      store,
      prefix: uniquePrefix(),
      clock,
      mode: "leased",
      leaseMs: 5000,
    });

  it("at a steady rate, about one store call per lease life: the refresh goes out just before a lease runs out", async () => {
    let now = T0 + 1000;
    const { store, calls } = counted(h.store("local"));
    const limiter = roomy(store, () => now);
    let waited = 0;
    // 60 s at 100 decisions per second on the limiter's clock.
    for (let i = 0; i < 6000; i++) {
      now += 10;
      const d = await limiter.limit("k");
      expect(d.allowed).toBe(true);
      if (d.source !== "lease") waited++;
      await d.pending;
    }
    // 60 s of 5 s leases (each 4.95 s after its safety margin): 13 leases, and a first call that
    // learns the rate. (The clock is the test's: the same count on every run.) Refreshing at a
    // quarter of the units left, before a lease is nearly done, makes 15.
    expect(calls()).toBeGreaterThanOrEqual(13);
    expect(calls()).toBeLessThanOrEqual(14);
    // Only the first decisions wait for the store; later ones are served while the refresh runs.
    expect(waited).toBeLessThanOrEqual(3);
    await limiter.flush();
  });

  it("an instance that sees the key a few times per lease still makes about one call per lease life", async () => {
    let now = T0 + 1000;
    const { store, calls } = counted(h.store("local"));
    const limiter = roomy(store, () => now);
    // 120 s at 0.8 decisions per second: 4 per lease life.
    for (let i = 0; i < 96; i++) {
      now += 1250;
      const d = await limiter.limit("k");
      expect(d.allowed).toBe(true);
      await d.pending;
    }
    // A lease lives 4.95 s: 25 of them in 120 s, and the first calls that measure the rate. A
    // refresh sent two requests before the end, half-way through each lease, makes 49.
    expect(calls()).toBeLessThanOrEqual(27);
    await limiter.flush();
  });

  it("no refresh from a lease its window cuts short, in that window's last quarter of a lease life", async () => {
    const wend = T0 + HOUR;
    let now = wend - 3000;
    const { store, refreshes } = counted(h.store("local"));
    const limiter = roomy(store, () => now);
    let late = 0;
    let served = 0;
    while (now < wend - 10) {
      now += 10;
      const before = refreshes();
      const d = await limiter.limit("k");
      if (d.source === "lease") served++;
      await d.pending;
      // The last 1,250 ms of the window: a lease asked for then would end with the window. (The
      // decisions of its last few ms, past the lease's safety margin, are exact.)
      if (now >= wend - 1250) late += refreshes() - before;
    }
    expect(late).toBe(0);
    expect(served).toBeGreaterThan(280);
    now = wend + 10;
    const first = await limiter.limit("k");
    expect(first.source).toBe("store");
    expect(first.resetAt).toBe(wend + HOUR);
    await limiter.flush();
  });

  it("a denial charges and grants nothing; Retry-After comes from the store", async () => {
    let now = T0 + 1000;
    const prefix = uniquePrefix();
    const store = h.store("local", { denyCache: false });
    const limiter = createRateLimiter({
      policy: fixedWindow({ limit: 10, window: HOUR }),
      store,
      prefix,
      clock: () => now,
      mode: "leased",
    });
    let admitted = 0;
    for (let i = 0; i < 30; i++) {
      const d = await limiter.limit("k");
      if (d.allowed) admitted++;
      else {
        expect(d.source).toBe("store");
        expect(d.retryAfterMs).toBe(HOUR - 1000 - i);
      }
      now += 1;
    }
    expect(admitted).toBeLessThanOrEqual(10);
    await limiter.flush();
    expect(await stored(prefix, "k")).toBe(admitted);
  });

  it("a lease never outlives its window: the first decision of the next window goes to the store", async () => {
    let now = T0 + HOUR - 2000;
    const store = h.store("local");
    const limiter = createRateLimiter({
      policy: fixedWindow({ limit: 1000, window: HOUR }),
      store,
      prefix: uniquePrefix(),
      clock: () => now,
      mode: "leased",
    });
    for (let i = 0; i < 20; i++) {
      await limiter.limit("k");
      now += 10;
    }
    now = T0 + HOUR;
    expect((await limiter.limit("k")).source).toBe("store");
  });

  it("a retried lease call charges nothing again; a retried return gives back nothing twice", async () => {
    const now = T0 + 1000;
    const prefix = uniquePrefix();
    const store = h.store("local", { denyCache: false });
    const set = { prefix, policies: [fixedWindow({ limit: 100, window: HOUR })] };
    const request = { cost: 1, want: 20, lifeMs: 5000, minLifeMs: 100, id: "abc" };
    const a = await store.lease!(set, "k", request, now);
    const b = await store.lease!(set, "k", request, now);
    expect(a[0]).toBe(1);
    expect(a[6]).toBe(20);
    expect(b.slice(0, 7)).toEqual(a.slice(0, 7));
    expect(await stored(prefix, "k")).toBe(21);
    const back = { cost: 0, want: 0, lifeMs: 5000, minLifeMs: 100, id: "def", returns: [{ id: "abc", unspent: 15 }] };
    await store.lease!(set, "k", back, now);
    await store.lease!(set, "k", { ...back, id: "ghi" }, now);
    expect(await stored(prefix, "k")).toBe(6);
  });

  it("a remembered denial does not keep units from coming back: a call that returns units is sent, and admits with them", async () => {
    const now = T0 + 1000;
    const prefix = uniquePrefix();
    const store = h.store("local"); // with its deny cache
    const other = h.store("local", { denyCache: false });
    const set = { prefix, policies: [fixedWindow({ limit: 10, window: HOUR })] };
    const lease = await store.lease!(set, "k", { cost: 1, want: 4, lifeMs: 5000, minLifeMs: 100, id: "held" }, now);
    expect(lease[0]).toBe(1);
    expect(lease[6]).toBe(4);
    // Another instance takes the rest; this one is denied, and remembers it.
    for (let i = 0; i < 5; i++) expect((await other.consume(set, "k", 1, now))[0]).toBe(1);
    const denied = await store.lease!(set, "k", { cost: 1, want: 4, lifeMs: 5000, minLifeMs: 100, id: "d1" }, now);
    expect(denied[0]).toBe(0);
    expect(denied[denied.length - 1]).not.toBe(0); // from Redis, not the cache
    expect((await store.lease!(set, "k", { cost: 1, want: 4, lifeMs: 5000, minLifeMs: 100, id: "d2" }, now)).at(-1)).toBe(0); // the cache
    // The held lease goes back, unspent: the call is sent, and the units it returns admit it.
    const back = await store.lease!(set, "k", {
      cost: 1,
      want: 0,
      lifeMs: 5000,
      minLifeMs: 100,
      id: "d3",
      returns: [{ id: "held", unspent: 4 }],
    }, now);
    expect(back[0]).toBe(1);
    expect(await stored(prefix, "k")).toBe(10 - 4 + 1);
    expect(await h.admin.exists(`${prefix}{k}:l:held`)).toBe(0);
  });

  it("every lease goes back, spent ones too (a spent lease a refresh replaces included): no ledger record is left behind", async () => {
    let now = T0 + 1000;
    const prefix = uniquePrefix();
    const limiter = createRateLimiter({
      policy: fixedWindow({ limit: 20, window: HOUR }),
      store: h.store("local"), // with its deny cache
      prefix,
      clock: () => now,
      mode: "leased",
    });
    let denials = 0;
    for (let i = 0; i < 60; i++) {
      now += 5;
      const d = await limiter.limit("k");
      if (!d.allowed) denials++;
      await d.pending;
    }
    expect(denials).toBeGreaterThan(0);
    await limiter.flush();
    const left = await h.admin.keys(`${prefix}*:l:*`);
    expect(left).toEqual([]);
  });

  it("a lease call that failed on the way back is returned whole by the next call", async () => {
    let now = T0 + 1000;
    const prefix = uniquePrefix();
    const inner = h.store("local", { denyCache: false });
    let failNext = false;
    // The store ran the call; its answer was lost on the way back (a dropped connection).
    const lossy = {
      ...inner,
      name: inner.name,
      lease: async (...a: Parameters<NonNullable<typeof inner.lease>>) => {
        const result = await inner.lease!(...a);
        if (failNext) {
          failNext = false;
          throw new Error("connection reset");
        }
        return result;
      },
      consume: inner.consume.bind(inner),
      peek: inner.peek.bind(inner),
      refund: inner.refund.bind(inner),
      reset: inner.reset.bind(inner),
    };
    const limiter = createRateLimiter({
      policy: fixedWindow({ limit: 1000, window: HOUR }),
      store: lossy,
      prefix,
      clock: () => now,
      mode: "leased",
      resilience: false,
    });
    for (let i = 0; i < 50; i++) {
      now += 10;
      await (await limiter.limit("k")).pending;
    }
    await limiter.flush();
    expect(await stored(prefix, "k")).toBe(50);
    failNext = true;
    now += 10;
    await expect(limiter.limit("k")).rejects.toThrow(/connection reset/);
    // That call charged its request and a lease; the next call gives the lease back.
    now += 10;
    expect((await limiter.limit("k")).allowed).toBe(true);
    await limiter.flush();
    expect(await stored(prefix, "k")).toBe(52);
  });

  it(
    "a lease call whose answer never comes strands no other decision on the key: they wait for it the store's deadline at most",
    async () => {
      let now = T0 + 1000;
      const prefix = uniquePrefix();
      const inner = h.store("local", { denyCache: false });
      let loseNext = false;
      // The store ran the call; its answer never comes (as in a Worker whose request ended with it).
      const losing = {
        ...inner,
        name: inner.name,
        lease: async (...a: Parameters<NonNullable<typeof inner.lease>>) => {
          const result = await inner.lease!(...a);
          if (!loseNext) return result;
          loseNext = false;
          return new Promise<never>(() => undefined);
        },
        consume: inner.consume.bind(inner),
        peek: inner.peek.bind(inner),
        refund: inner.refund.bind(inner),
        reset: inner.reset.bind(inner),
      };
      // No deadline of its own: the waiters wait the default one (1 s).
      const limiter = createRateLimiter({
        policy: fixedWindow({ limit: 1000, window: HOUR }),
        store: losing,
        prefix,
        clock: () => now,
        mode: "leased",
        resilience: false,
      });
      for (let i = 0; i < 50; i++) {
        now += 10;
        await (await limiter.limit("k")).pending;
      }
      await limiter.flush();
      loseNext = true;
      now += 10;
      const lost = limiter.limit("k");
      const stranded = new Promise<"stranded">((resolve) => setTimeout(() => resolve("stranded"), 15_000).unref());
      const next = await Promise.race([Promise.all([limiter.limit("k"), limiter.limit("k")]), stranded]);
      expect(next).not.toBe("stranded");
      expect((next as Decision[]).map((d) => d.allowed)).toEqual([true, true]);
      await expect(Promise.race([limiter.flush().then(() => "flushed"), stranded])).resolves.toBe("flushed");
      // 50, the lost call's own request, the two after it; the lease the lost call brought went back whole.
      expect(await stored(prefix, "k")).toBe(53);
      expect(await h.admin.keys(`${prefix}*:l:*`)).toEqual([]);
      void lost;
    },
    30_000,
  );

  it("leases nothing when a policy has less than 1% of its limit (or 2 × cost) left, and at most half of what is left", async () => {
    const now = T0 + 1000;
    const prefix = uniquePrefix();
    const store = h.store("local", { denyCache: false });
    const set = { prefix, policies: [fixedWindow({ limit: 1000, window: HOUR })] };
    const big = await store.lease!(set, "k", { cost: 1, want: 10_000, lifeMs: 5000, minLifeMs: 100, id: "x1" }, now);
    expect(big[6]).toBe(499); // (1000 - 1) / 2, rounded down
    const more = await store.lease!(set, "k", { cost: 490, want: 10_000, lifeMs: 5000, minLifeMs: 100, id: "x2" }, now);
    expect(more[0]).toBe(1);
    expect(more[6]).toBe(0); // 10 left: 1% of 1000
  });

  it("a token bucket is decided against its capacity less the lease reserve", async () => {
    const now = T0 + 1000;
    const store = h.store("local", { denyCache: false });
    const policy = tokenBucket({ capacity: 100, refillRate: 1 });
    const limiter = createRateLimiter({ policy, store, prefix: uniquePrefix(), clock: () => now, mode: "leased", leaseMs: 20_000 });
    // 20 tokens in reserve: 80 admitted at one instant, not 100.
    let admitted = 0;
    for (let i = 0; i < 100; i++) if ((await limiter.limit("k")).allowed) admitted++;
    expect(admitted).toBe(80);
  });

  it('the middleware\'s `mode: "leased"`: decisions from leases, exact limit and reset headers, 429 only from the store', async () => {
    let now = T0 + 1000;
    const prefix = uniquePrefix();
    const store = h.store("local");
    const handler = withRateLimit(() => new Response("ok"), {
      policy: fixedWindow({ limit: 50, window: HOUR }),
      store,
      prefix,
      clock: () => now,
      mode: "leased",
      getClientIp: () => "127.0.0.1",
      warnings: false,
    });
    const statuses: number[] = [];
    let lastRemaining = Infinity;
    for (let i = 0; i < 70; i++) {
      now += 1;
      const r = await handler(new Request("http://localhost/"));
      statuses.push(r.status);
      expect(r.headers.get("x-ratelimit-limit")).toBe("50");
      expect(Number(r.headers.get("x-ratelimit-reset"))).toBe(Math.ceil((T0 + HOUR) / 1000));
      const remaining = Number(r.headers.get("x-ratelimit-remaining"));
      if (r.status === 200) {
        expect(remaining).toBeLessThanOrEqual(lastRemaining);
        lastRemaining = remaining;
        expect(r.headers.get("retry-after")).toBeNull();
      } else expect(Number(r.headers.get("retry-after"))).toBe(Math.ceil((T0 + HOUR - now) / 1000));
    }
    const admitted = statuses.filter((s) => s === 200).length;
    expect(admitted).toBeGreaterThan(40);
    expect(admitted).toBeLessThanOrEqual(50);
  });

  it("the middleware's flush() gives its leases back: the store then holds exactly what was admitted", async () => {
    let now = T0 + 1000;
    const prefix = uniquePrefix();
    const handler = withRateLimit(() => new Response("ok"), {
      policy: fixedWindow({ limit: 1000, window: HOUR }),
      store: h.store("local"),
      prefix,
      clock: () => now,
      mode: "leased",
      getClientIp: () => "127.0.0.1",
      warnings: false,
    });
    for (let i = 0; i < 100; i++) {
      now += 10;
      expect((await handler(new Request("http://localhost/"))).status).toBe(200);
    }
    expect(await stored(prefix, "127.0.0.1")).toBeGreaterThan(100); // units leased ahead
    await handler.flush();
    expect(await stored(prefix, "127.0.0.1")).toBe(100);
  });

  it("the middleware's flush() gives back the leases of every set a policy function returned", async () => {
    let now = T0 + 1000;
    const prefix = uniquePrefix();
    const free = fixedWindow({ limit: 1000, window: HOUR, name: "free" });
    const pro = fixedWindow({ limit: 5000, window: HOUR, name: "pro" });
    const handler = withRateLimit(() => new Response("ok"), {
      policy: (req) => (req.header("x-plan") === "pro" ? pro : free),
      key: (req) => req.header("x-plan"),
      store: h.store("local"),
      prefix,
      clock: () => now,
      mode: "leased",
      getClientIp: () => "127.0.0.1",
      warnings: false,
    });
    for (let i = 0; i < 60; i++) {
      now += 10;
      for (const plan of ["free", "pro"]) {
        expect((await handler(new Request("http://localhost/", { headers: { "x-plan": plan } }))).status).toBe(200);
      }
    }
    // Each set counts in a namespace of its own under the prefix: find its key.
    const counted = async (key: string): Promise<number> => {
      const found = (await (h.admin as IORedis).keys(`${prefix}*`)).filter((k) => k.endsWith(`{${key}}`));
      expect(found).toHaveLength(1);
      return stored(found[0]!.slice(0, -`{${key}}`.length), key);
    };
    expect(await counted("free")).toBeGreaterThan(60);
    expect(await counted("pro")).toBeGreaterThan(60);
    await handler.flush();
    expect([await counted("free"), await counted("pro")]).toEqual([60, 60]);
  });

  it("the middleware's flush() never rejects: a lease it could not give back goes to onStoreError, and a later flush() returns it", async () => {
    let now = T0 + 1000;
    const prefix = uniquePrefix();
    const inner = h.store("local", { denyCache: false });
    let failing = false;
    const lossy = {
      ...inner,
      name: inner.name,
      lease: async (...a: Parameters<NonNullable<typeof inner.lease>>) => {
        if (failing) throw new Error("connection reset");
        return inner.lease!(...a);
      },
      consume: inner.consume.bind(inner),
      peek: inner.peek.bind(inner),
      refund: inner.refund.bind(inner),
      reset: inner.reset.bind(inner),
    };
    const reported: FloodgateError[] = [];
    const handler = withRateLimit(() => new Response("ok"), {
      policy: fixedWindow({ limit: 1000, window: HOUR }),
      store: lossy,
      prefix,
      clock: () => now,
      mode: "leased",
      getClientIp: () => "127.0.0.1",
      warnings: false,
      logger: { warn: () => {} },
      onStoreError: (error) => {
        reported.push(error);
      },
    });
    for (let i = 0; i < 50; i++) {
      now += 10;
      expect((await handler(new Request("http://localhost/"))).status).toBe(200);
    }
    expect(await stored(prefix, "127.0.0.1")).toBeGreaterThan(50);
    failing = true;
    await handler.flush(); // resolves
    expect(reported.map((e) => [e.code, e.message.includes("connection reset")])).toEqual([["STORE_ERROR", true]]);
    expect(await stored(prefix, "127.0.0.1")).toBeGreaterThan(50);
    failing = false;
    await handler.flush();
    expect(await stored(prefix, "127.0.0.1")).toBe(50);
  });

  it("a lease refresh a decision starts is handed to the platform's waitUntil (withRateLimit)", async () => {
    const store = h.store("server");
    let now = T0;
    const handed: Promise<unknown>[] = [];
    const ctx = { waitUntil: (promise: Promise<unknown>) => void handed.push(promise) };
    const handler = withRateLimit<[typeof ctx]>(() => new Response("ok"), {
      policy: fixedWindow({ limit: 1000, window: HOUR }),
      store,
      prefix: uniquePrefix(),
      clock: () => now,
      mode: "leased",
      getClientIp: () => "127.0.0.1",
      warnings: false,
    });
    for (let i = 0; i < 40; i++) {
      now += 1;
      const r = await handler(new Request("http://localhost/"), ctx);
      expect(r.status).toBe(200);
    }
    // No settlement or refund here: only a leased decision's refresh can have been handed over.
    expect(handed.length).toBeGreaterThan(0);
    await Promise.all(handed); // and it never rejects
  });

  it("the safety rules: a sliding log, a block or a concurrency policy stays exact, a short token bucket is refused with LEASE_UNSUITABLE", () => {
    const store = h.store("server");
    expect(createRateLimiter({ policy: slidingLog({ limit: 10, window: 1000 }), store, mode: "leased" }).mode).toBe("exact");
    expect(
      createRateLimiter({
        policy: [slidingWindow({ limit: 10, window: 1000, name: "a" }), slidingLog({ limit: 10, window: 1000, name: "b" })],
        store,
        mode: "leased",
      }).mode,
    )
      .toBe("exact");
    expect(createRateLimiter({ policy: fixedWindow({ limit: 10, window: 1000 }), store: memoryStore(), mode: "leased" }).mode).toBe(
      "exact",
    );
    // A block starts at a denial in any instance; an in-flight unit belongs to one request.
    expect(createRateLimiter({ policy: fixedWindow({ limit: 10, window: 1000, block: "1m" }), store, mode: "leased" }).mode).toBe("exact");
    expect(createRateLimiter({ policy: [concurrency({ limit: 2 }), fixedWindow({ limit: 10, window: 1000 })], store, mode: "leased" }).mode)
      .toBe("exact");
    expect(createRateLimiter({ policy: fixedWindow({ limit: 100, window: 60_000 }), store, mode: "leased" }).mode).toBe("leased");
    let error: unknown;
    try {
      createRateLimiter({ policy: tokenBucket({ capacity: 10, refillRate: 5 }), store, mode: "leased" });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(FloodgateError);
    expect((error as FloodgateError).code).toBe("LEASE_UNSUITABLE");
    expect((error as Error).message).toMatch(/leaseMs/);
  });
});
