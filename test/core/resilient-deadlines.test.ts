// The resilient store's deadlines, kept on one timer per store: each call still fails at its own
// deadline, an answer in time is not failed, and the timer holds the process open only while a
// call is in flight (as a timer per call did).
import {
  createRateLimiter,
  fixedWindow,
  FloodgateError,
  memoryStore,
  type RateLimitStore,
  resilientStore,
  type StoreResult,
} from "@floodgate/core";
import { describe, expect, it } from "vitest";

/** A store whose consumes wait until released (then answer as a memory store does). */
function waitingStore() {
  const inner = memoryStore();
  const waiting: Array<() => void> = [];
  const store = {
    name: "waiting",
    waiting,
    consume: (...args: Parameters<RateLimitStore["consume"]>) =>
      new Promise<StoreResult>((resolve) => waiting.push(() => resolve(inner.consume(...args) as StoreResult))),
    peek: (...args: Parameters<RateLimitStore["peek"]>) => Promise.resolve(inner.peek(...args)),
    refund: (...args: Parameters<RateLimitStore["refund"]>) => Promise.resolve(inner.refund(...args)),
    reset: (...args: Parameters<RateLimitStore["reset"]>) => Promise.resolve(inner.reset(...args)),
  };
  return store;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const policy = fixedWindow({ limit: 100, window: "1m" });
const set = Object.freeze({ prefix: "t:", policies: [policy] });
const timers = () => process.getActiveResourcesInfo().filter((r) => r === "Timeout").length;

/** When a call settled, ms after it was made, and how. */
async function outcome(call: Promise<unknown>, started: number): Promise<{ ms: number; code: string }> {
  try {
    await call;
    return { ms: performance.now() - started, code: "ok" };
  } catch (error) {
    return { ms: performance.now() - started, code: error instanceof FloodgateError ? error.code : String(error) };
  }
}

describe("resilient store deadlines", () => {
  it("calls made at different times each time out at their own deadline, the later one not with the first", async () => {
    const store = waitingStore();
    const guarded = resilientStore(store, { timeoutMs: 150, circuitBreaker: false, logger: false });
    const t0 = performance.now();
    const first = outcome(Promise.resolve(guarded.consume(set, "a", 1, Date.now())), t0);
    await sleep(80);
    const t1 = performance.now();
    const second = outcome(Promise.resolve(guarded.consume(set, "b", 1, Date.now())), t1);
    const [a, b] = await Promise.all([first, second]);
    expect(a.code).toBe("STORE_TIMEOUT");
    expect(b.code).toBe("STORE_TIMEOUT");
    // Timers may fire up to a millisecond before performance.now() says they are due.
    expect(a.ms).toBeGreaterThanOrEqual(148);
    expect(b.ms).toBeGreaterThanOrEqual(148);
    expect(b.ms).toBeLessThan(1000);
    // Abandoned, not settled: both are still the store's calls in flight.
    expect(guarded.stats()).toMatchObject({ timeouts: 2, inFlight: 2 });
  });

  it("an answer in time resolves and is not failed at its deadline; a call after the list emptied still times out", async () => {
    const store = waitingStore();
    const guarded = resilientStore(store, { timeoutMs: 100, circuitBreaker: false, logger: false });
    const answered = Promise.resolve(guarded.consume(set, "a", 1, Date.now()));
    const hanging = outcome(Promise.resolve(guarded.consume(set, "b", 1, Date.now())), performance.now());
    store.waiting[0]!();
    expect((await answered)[0]).toBe(1);
    expect((await hanging).code).toBe("STORE_TIMEOUT");
    await sleep(150);
    expect(guarded.stats()).toMatchObject({ timeouts: 1, failures: 1, inFlight: 1 });
    // Nothing in flight and the timer long gone: a new call gets a deadline all the same.
    const late = await outcome(Promise.resolve(guarded.consume(set, "c", 1, Date.now())), performance.now());
    expect(late.code).toBe("STORE_TIMEOUT");
    expect(late.ms).toBeGreaterThanOrEqual(98);
    expect(guarded.stats()).toMatchObject({ timeouts: 2 });
  });

  it("the deadline's timer keeps the process alive only while a call is in flight", async () => {
    const store = waitingStore();
    const limiter = createRateLimiter({ policy, store, resilience: { timeoutMs: 5_000, logger: false } });
    await sleep(0);
    const before = timers();
    const decision = limiter.limit("a");
    expect(timers()).toBe(before + 1);
    store.waiting[0]!();
    expect((await decision).allowed).toBe(true);
    // The timer is still set (for the deadline the call had), but no longer holds the process.
    expect(timers()).toBe(before);
    const next = limiter.limit("a");
    expect(timers()).toBe(before + 1);
    store.waiting[1]!();
    expect((await next).remaining).toBe(98);
    expect(timers()).toBe(before);
  });
});
