/**
 * Leased mode over a store that implements `lease` through `evaluateState` (a compare-and-set
 * store, a Durable Object): decisions from a lease need no store call, unspent units go back
 * once, and several instances leasing one key never admit past the limit. The store must run on
 * the caller's clock. Runs under vitest and under Deno.
 */
import { expect, it } from "vitest";
import { createRateLimiter, fixedWindow, type RateLimitStore, slidingWindow, tokenBucket } from "../../packages/core/src/index.ts";
import { uniquePrefix } from "./store-contract.ts";

const T0 = 1_700_002_800_000; // an hour boundary
const HOUR = 3_600_000;

/** A store that counts its calls, every other property being the store's. */
function counted(store: RateLimitStore): { store: RateLimitStore; calls: () => number } {
  let n = 0;
  const wrapped = new Proxy(store, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver);
      if (typeof value !== "function" || property === "dispose") return value;
      return (...args: unknown[]) => {
        n++;
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return { store: wrapped, calls: () => n };
}

/** Registers the leased-mode tests for stores `store()` returns (on the caller's clock). */
export function leaseChecks(store: () => RateLimitStore): void {
  it("leased mode: decisions from a lease with no store call; flush() gives the unspent units back, once", async () => {
    let now = T0 + 1000;
    const prefix = uniquePrefix();
    const { store: s, calls } = counted(store());
    const policy = fixedWindow({ limit: 1000, window: HOUR });
    const limiter = createRateLimiter({ policy, store: s, prefix, clock: () => now, mode: "leased" });
    expect(limiter.mode).toBe("leased");
    let admitted = 0;
    for (let i = 0; i < 200; i++) {
      now += 10;
      const d = await limiter.limit("k");
      expect(d.allowed).toBe(true);
      admitted++;
      await d.pending;
    }
    expect(calls()).toBeLessThan(40);
    await limiter.flush();
    const exact = createRateLimiter({ policy, store: s, prefix, clock: () => now });
    expect((await exact.peek("k")).remaining).toBe(1000 - admitted);
    await limiter.flush();
    expect((await exact.peek("k")).remaining).toBe(1000 - admitted);
  });

  it.each(["fixed-window", "sliding-window", "token-bucket"] as const)(
    "leased mode, 4 instances on one key (%s): exactly the limit admitted, never more",
    async (kind) => {
      let now = T0 + 1000;
      const prefix = uniquePrefix();
      const policy = kind === "fixed-window"
        ? fixedWindow({ limit: 100, window: HOUR })
        : kind === "sliding-window"
        ? slidingWindow({ limit: 100, window: HOUR })
        : tokenBucket({ capacity: 100, refillRate: 100 / 3600 / 1000 });
      const shared = store();
      const instances = Array.from(
        { length: 4 },
        () => createRateLimiter({ policy, store: shared, prefix, clock: () => now, mode: "leased" }),
      );
      let admitted = 0;
      for (let round = 0; round < 100; round++) {
        now += 5;
        const decisions = await Promise.all(instances.map((l) => l.limit("hot")));
        admitted += decisions.filter((d) => d.allowed).length;
        await Promise.all(decisions.map((d) => d.pending));
      }
      expect(admitted).toBeLessThanOrEqual(100);
      // Units leased and unspent go back: an instance then sees them.
      await Promise.all(instances.map((l) => l.flush()));
      const exact = createRateLimiter({ policy, store: shared, prefix, clock: () => now });
      expect(admitted + (await exact.peek("hot")).remaining).toBe(100);
    },
  );
}
