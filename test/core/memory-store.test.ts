import { describe, expect, it } from "vitest";
import { createRateLimiter, fixedWindow, memoryStore, slidingLog, tokenBucket } from "../../packages/core/src/index.ts";

const START = 1_767_225_600_000;

describe("memoryStore bounds", () => {
  it("never holds more than maxKeys identifiers, evicting the least recently used", async () => {
    const store = memoryStore({ maxKeys: 4 });
    const limiter = createRateLimiter({ policy: fixedWindow({ limit: 5, window: "1h" }), store, clock: () => START });
    for (const key of ["a", "b", "c", "d"]) await limiter.limit(key);
    await limiter.limit("a"); // a is used again: b is now the least recently used
    await limiter.limit("e");
    expect(store.size).toBe(4);
    expect((await limiter.peek("a")).remaining).toBe(3);
    expect((await limiter.peek("b")).remaining).toBe(5); // evicted: starts afresh
    expect((await limiter.peek("c")).remaining).toBe(4);
    for (let i = 0; i < 1000; i++) await limiter.limit(`k${i}`);
    expect(store.size).toBe(4);
  });

  it("evicts expired identifiers before live ones", async () => {
    let now = START;
    const store = memoryStore({ maxKeys: 3 });
    const limiter = createRateLimiter({ policy: fixedWindow({ limit: 5, window: "1s" }), store, clock: () => now });
    await limiter.limit("old"); // its window ends at START + 1000
    now += 1500;
    await limiter.limit("b");
    await limiter.limit("c");
    await limiter.limit("d"); // full: "old" has expired, so it goes, not "b"
    expect(store.size).toBe(3);
    expect((await limiter.peek("b")).remaining).toBe(4);
    expect((await limiter.peek("c")).remaining).toBe(4);
    expect((await limiter.peek("d")).remaining).toBe(4);
  });

  it("allocates nothing for a denial of a key it does not hold, nor for a peek", async () => {
    const store = memoryStore();
    const limiter = createRateLimiter({ policy: tokenBucket({ capacity: 2, refillRate: 1 }), store });
    await limiter.limit("k", { cost: 3 });
    await limiter.peek("j");
    expect(store.size).toBe(0);
  });

  it("keeps sliding logs per key and frees them with the key", async () => {
    const store = memoryStore({ maxKeys: 2 });
    const limiter = createRateLimiter({ policy: slidingLog({ limit: 3, window: "1h" }), store, clock: () => START });
    await limiter.limit("a", { cost: 2 });
    await limiter.limit("b", { cost: 1 });
    await limiter.limit("c", { cost: 3 }); // evicts a
    expect((await limiter.peek("a")).remaining).toBe(3);
    expect((await limiter.peek("b")).remaining).toBe(2);
    expect((await limiter.peek("c")).remaining).toBe(0);
  });

  it("a key reused under another policy layout starts afresh instead of misreading state", async () => {
    const store = memoryStore();
    const a = createRateLimiter({ policy: fixedWindow({ limit: 5, window: "1h" }), store, prefix: "p:", clock: () => START });
    const b = createRateLimiter({ policy: tokenBucket({ capacity: 5, refillRate: 1 }), store, prefix: "p:", clock: () => START });
    await a.limit("k", { cost: 4 });
    expect((await b.limit("k")).remaining).toBe(4);
  });

  it("dispose() drops every identifier", async () => {
    const store = memoryStore();
    const limiter = createRateLimiter({ policy: fixedWindow({ limit: 5, window: "1h" }), store });
    await limiter.limit("k");
    store.dispose();
    expect(store.size).toBe(0);
  });
});
