/**
 * Round trips, counted by the bridge (HTTP requests) and by Redis (INFO commandstats): one script
 * call per decision in steady state, one extra only after SCRIPT FLUSH, none for an identifier
 * the deny cache knows is denied.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Redis as UpstashRedis } from "@upstash/redis";
import { concurrency, createRateLimiter, fixedWindow, type PolicyKind, tokenBucket, upstashStore } from "../../packages/core/src/index.ts";
import { hourly, KINDS, uniquePrefix } from "../stores/store-contract.ts";
import { ioredisHarness, type RedisHarness, type UpstashHarness, upstashHarness } from "./harness.ts";

async function commandCalls(h: RedisHarness): Promise<Record<string, number>> {
  const info = (await h.admin.info("commandstats")) as string;
  const calls: Record<string, number> = {};
  for (const [, name, n] of info.matchAll(/cmdstat_([a-z|]+):calls=(\d+)/g)) calls[name!] = Number(n);
  return calls;
}

describe("upstashStore round trips (bridge request counter)", () => {
  let h: UpstashHarness;
  beforeAll(async () => {
    h = await upstashHarness();
  });
  afterAll(async () => {
    await h?.close();
  });

  it.each([...KINDS, "multi" as const])(
    "%s: exactly one HTTP request per decision in steady state; after SCRIPT FLUSH one extra, once",
    async (kind) => {
      const policy = kind === "multi"
        ? [hourly("token-bucket", 1000, "a"), hourly("sliding-log", 1000, "b")]
        : hourly(kind as PolicyKind, 1000);
      const limiter = createRateLimiter({ policy, store: h.store("server"), prefix: uniquePrefix() });
      await limiter.limit("warm");
      h.bridge.resetCounters();
      for (let i = 0; i < 20; i++) expect((await limiter.limit(`id${i % 3}`)).allowed).toBe(true);
      expect(h.bridge.requests.total).toBe(20);

      await h.admin.script("FLUSH");
      h.bridge.resetCounters();
      expect((await limiter.limit("after-flush")).allowed).toBe(true);
      expect(h.bridge.requests.total).toBe(2);
      h.bridge.resetCounters();
      for (let i = 0; i < 5; i++) await limiter.limit("after-flush");
      await limiter.peek("after-flush");
      expect(h.bridge.requests.total).toBe(6);
    },
  );

  it("calls made together before the script is known: one command and one request each, no NOSCRIPT", async () => {
    await h.admin.script("FLUSH");
    const limiter = createRateLimiter({ policy: hourly("fixed-window", 30), store: h.store("server"), prefix: uniquePrefix() });
    await h.admin.config("RESETSTAT");
    const decisions = await Promise.all(Array.from({ length: 40 }, () => limiter.limit("together")));
    expect(decisions.filter((d) => d.allowed)).toHaveLength(30);
    // Upstash bills commands: one EVAL per call (it loads the script too), none answered NOSCRIPT.
    const calls = await commandCalls(h);
    expect(calls["eval"]).toBe(40);
    expect(calls["evalsha"]).toBeUndefined();
    // A client sending a request per command: 40 requests for the 40 decisions.
    await h.admin.script("FLUSH");
    const single = new UpstashRedis({ url: h.bridge.url, token: h.bridge.token, enableTelemetry: false, enableAutoPipelining: false });
    const apart = createRateLimiter({ policy: hourly("fixed-window", 30), store: upstashStore({ redis: single }), prefix: uniquePrefix() });
    h.bridge.resetCounters();
    await Promise.all(Array.from({ length: 40 }, () => apart.limit("together")));
    expect(h.bridge.requests.total).toBe(40);
    // Once one EVAL has answered, decisions go by the script's SHA1 again.
    h.bridge.resetCounters();
    await apart.limit("after");
    expect(h.bridge.requests.total).toBe(1);
    expect((await commandCalls(h))["evalsha"]).toBe(1);
  });

  it("a denied identifier is answered locally, with zero requests, until its retry time", async () => {
    let now = 1_700_002_800_000 + 5000; // 5 s into an hour
    const store = h.store("local");
    const limiter = createRateLimiter({ policy: hourly("fixed-window", 3), store, prefix: uniquePrefix(), clock: () => now });
    for (let i = 0; i < 3; i++) await limiter.limit("d");
    const first = await limiter.limit("d");
    expect(first.allowed).toBe(false);
    h.bridge.resetCounters();
    now += 1000;
    for (let i = 0; i < 50; i++) {
      const d = await limiter.limit("d");
      expect(d.allowed).toBe(false);
      expect(d.retryAfterMs).toBe(first.retryAfterMs - 1000);
    }
    expect(h.bridge.requests.total).toBe(0);
    expect(store.deniedKeys).toBe(1);
    // A larger cost has its own exact wait: the store answers it.
    const larger = await limiter.limit("d", { cost: 2 });
    expect(larger.allowed).toBe(false);
    expect(h.bridge.requests.total).toBe(1);
    // A smaller cost than the cached denial still asks the store.
    const other = createRateLimiter({ policy: hourly("fixed-window", 3), store, prefix: uniquePrefix(), clock: () => now });
    for (let i = 0; i < 3; i++) await other.limit("e");
    await other.limit("e", { cost: 2 });
    h.bridge.resetCounters();
    await other.limit("e");
    expect(h.bridge.requests.total).toBe(1);
    // This process's refund clears the entry.
    await limiter.refund("d");
    h.bridge.resetCounters();
    expect((await limiter.limit("d")).allowed).toBe(true);
    expect(h.bridge.requests.total).toBe(1);
  });

  it("with the deny cache off, every decision is one request", async () => {
    const limiter = createRateLimiter({
      policy: hourly("token-bucket", 2),
      store: h.store("server", { denyCache: false }),
      prefix: uniquePrefix(),
    });
    await limiter.peek("n"); // loads the script
    h.bridge.resetCounters();
    for (let i = 0; i < 10; i++) await limiter.limit("n");
    expect(h.bridge.requests.total).toBe(10);
  });

  it("reset is one request (a DEL of exactly the identifier's keys, no SCAN)", async () => {
    const limiter = createRateLimiter({
      policy: [hourly("token-bucket", 2, "a"), hourly("fixed-window", 2, "b")],
      store: h.store("server"),
      prefix: uniquePrefix(),
    });
    await limiter.limit("x");
    const before = await commandCalls(h);
    h.bridge.resetCounters();
    await limiter.reset("x");
    expect(h.bridge.requests.total).toBe(1);
    const after = await commandCalls(h);
    expect((after["del"] ?? 0) - (before["del"] ?? 0)).toBe(1);
    expect(after["scan"] ?? 0).toBe(before["scan"] ?? 0);
    expect(after["keys"] ?? 0).toBe(before["keys"] ?? 0);
  });
});

describe("redisStore round trips (INFO commandstats)", () => {
  let h: RedisHarness;
  beforeAll(async () => {
    h = await ioredisHarness();
  });
  afterAll(async () => {
    await h?.close();
  });

  it("one EVALSHA per decision; after SCRIPT FLUSH one EVAL, once", async () => {
    const limiter = createRateLimiter({ policy: hourly("sliding-window", 1000), store: h.store("server"), prefix: uniquePrefix() });
    await limiter.limit("warm");
    await h.admin.config("RESETSTAT");
    for (let i = 0; i < 25; i++) await limiter.limit("u");
    let calls = await commandCalls(h);
    expect(calls["evalsha"]).toBe(25);
    expect(calls["eval"]).toBeUndefined();
    await h.admin.script("FLUSH");
    await h.admin.config("RESETSTAT");
    for (let i = 0; i < 3; i++) expect((await limiter.limit("u")).allowed).toBe(true);
    calls = await commandCalls(h);
    expect(calls["evalsha"]).toBe(3);
    expect(calls["eval"]).toBe(1);
  });

  it("calls made together on a new store after SCRIPT FLUSH: one EVAL each, none answered NOSCRIPT", async () => {
    await h.admin.script("FLUSH");
    const limiter = createRateLimiter({ policy: hourly("token-bucket", 30), store: h.store("server"), prefix: uniquePrefix() });
    await h.admin.config("RESETSTAT");
    const decisions = await Promise.all(Array.from({ length: 40 }, () => limiter.limit("together")));
    expect(decisions.filter((d) => d.allowed)).toHaveLength(30);
    const calls = await commandCalls(h);
    expect(calls["eval"]).toBe(40);
    expect(calls["evalsha"]).toBeUndefined();
    await limiter.limit("after");
    expect((await commandCalls(h))["evalsha"]).toBe(1);
  });

  it("one EVALSHA per reserve and per settle (and per cancel), for a set of three policies; none for a denial's settle", async () => {
    const limiter = createRateLimiter({
      policy: [concurrency({ limit: 5 }), fixedWindow({ limit: 1000, window: "1h" }), tokenBucket({ capacity: 1000, refillRate: 1 })],
      store: h.store("server"),
      prefix: uniquePrefix(),
    });
    await (await limiter.reserve("warm")).settle(1);
    await h.admin.config("RESETSTAT");
    const held = [];
    for (let i = 0; i < 5; i++) held.push(await limiter.reserve("u", { estimate: 10 }));
    let calls = await commandCalls(h);
    expect(calls["evalsha"]).toBe(5);
    const denied = await limiter.reserve("u", { estimate: 10 });
    expect(denied.decision.allowed).toBe(false);
    await denied.cancel();
    calls = await commandCalls(h);
    expect(calls["evalsha"]).toBe(6);
    await h.admin.config("RESETSTAT");
    for (const [i, r] of held.entries()) await (i % 2 === 0 ? r.settle(12) : r.cancel());
    // A spent handle answers without a call; a settle by id (another process's retry) is one call, and finds nothing.
    for (const r of held) expect(await r.settle(3)).toBe(false);
    expect((await commandCalls(h))["evalsha"]).toBe(5);
    for (const r of held) expect(await limiter.settle("u", { id: r.id, actual: 3 })).toBe(false);
    calls = await commandCalls(h);
    expect(calls["evalsha"]).toBe(10);
    expect(calls["eval"]).toBeUndefined();
  });
});
