// The resilient store wrapper: the deadline, the probing breaker, the bound on calls in flight,
// the failure and recovery lines, and what createRateLimiter and the HTTP layer get from it.
import {
  createRateLimiter,
  fixedWindow,
  FloodgateError,
  memoryStore,
  type RateLimitStore,
  resilientStore,
  type StoreResult,
} from "@floodgate/core";
import { createHttpRateLimiter } from "@floodgate/core/http";
import { describe, expect, it } from "vitest";

const perMinute = (limit: number) => fixedWindow({ limit, window: "1m" });
const ACCESS = { method: () => "GET", path: () => "/x", header: () => undefined };

type Mode = "ok" | "throw" | "hang";

/** An asynchronous store over a memory store: answers, rejects, or hangs until released, as told. */
function controlledStore(mode: Mode = "ok") {
  const inner = memoryStore();
  const hanging: Array<{ release(): void; fail(error: unknown): void }> = [];
  const store = {
    name: "controlled",
    mode,
    calls: 0,
    unsettled: 0,
    maxUnsettled: 0,
    hanging,
    consume(...args: Parameters<RateLimitStore["consume"]>): Promise<StoreResult> {
      store.calls++;
      if (store.mode === "throw") return Promise.reject(new Error("connection refused"));
      if (store.mode === "hang") {
        store.maxUnsettled = Math.max(store.maxUnsettled, ++store.unsettled);
        return new Promise<StoreResult>((resolve, reject) => {
          hanging.push({
            release: () => {
              store.unsettled--;
              resolve(inner.consume(...args));
            },
            fail: (error) => {
              store.unsettled--;
              reject(error);
            },
          });
        });
      }
      return Promise.resolve(inner.consume(...args));
    },
    peek: (...args: Parameters<RateLimitStore["peek"]>) => Promise.resolve(inner.peek(...args)),
    refund: (...args: Parameters<RateLimitStore["refund"]>) => Promise.resolve(inner.refund(...args)),
    reset: (...args: Parameters<RateLimitStore["reset"]>) => Promise.resolve(inner.reset(...args)),
  };
  return store;
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 0));
const codeOf = (p: Promise<unknown>) => p.then(() => "ok", (e: unknown) => (e instanceof FloodgateError ? e.code : String(e)));

describe("createRateLimiter: a remote store gets a deadline by default", () => {
  it("a call to a store that never answers rejects with STORE_TIMEOUT after 1,000 ms", async () => {
    const store = controlledStore("hang");
    const limiter = createRateLimiter({ policy: perMinute(5), store, resilience: { logger: false } });
    const started = performance.now();
    await expect(limiter.limit("a")).rejects.toMatchObject({
      code: "STORE_TIMEOUT",
      message: expect.stringContaining("did not answer within 1000 ms"),
    });
    const waited = performance.now() - started;
    expect(waited).toBeGreaterThanOrEqual(990);
    expect(waited).toBeLessThan(1500);
  });

  it("the memory store is not wrapped (it answers synchronously); resilience: false calls a store bare", () => {
    const memory = memoryStore();
    expect(createRateLimiter({ policy: perMinute(5), store: memory }).store).toBe(memory);
    const store = controlledStore();
    expect(createRateLimiter({ policy: perMinute(5), store, resilience: false }).store).toBe(store);
    const wrapped = createRateLimiter({ policy: perMinute(5), store }).store;
    expect(wrapped).not.toBe(store);
    // Limiters on one store share one wrapper: one bound and one breaker per store.
    expect(createRateLimiter({ policy: perMinute(9), store }).store).toBe(wrapped);
  });

  it("bad options are INVALID_OPTION errors that say what is accepted", () => {
    const store = controlledStore();
    expect(() => resilientStore(store, { timeoutMs: 0 })).toThrow(
      /resilientStore\(\): invalid option `timeoutMs`: received 0; expected a whole number of milliseconds from 1 to 60000, or false/,
    );
    expect(() => resilientStore(store, { circuitBreaker: { cooldown: 5 } as never })).toThrow(
      /`circuitBreaker.cooldown`: received 5; expected false or \{ failures\?/,
    );
    expect(() => resilientStore(store, { maxInFlight: 0 })).toThrow(/`maxInFlight`: received 0; expected a whole number >= 1/);
    expect(() => resilientStore(store, { logger: {} as never })).toThrow(
      /`logger`: .*expected false or an object with a warn\(message\) method/,
    );
    expect(() => createRateLimiter({ policy: perMinute(1), store, resilience: "on" as never })).toThrow(
      /createRateLimiter\(\): invalid option `resilience`: received "on"; expected false, or the options of resilientStore\(\)/,
    );
    expect(() => resilientStore(undefined as never)).toThrow(/resilientStore\(\): received undefined as the store/);
  });
});

describe("a failing store is never silent", () => {
  it("logs once when it starts failing (with the error) and once when it recovers (how long, how many calls); counts failures", async () => {
    let now = 1_000_000;
    const lines: string[] = [];
    const store = controlledStore("throw");
    const seen: string[] = [];
    const guarded = resilientStore(store, {
      circuitBreaker: { failures: 3 },
      logger: {
        warn: (m) => {
          lines.push(`warn ${m}`);
        },
        info: (m) => {
          lines.push(`info ${m}`);
        },
      },
      onFailure: (error) => {
        seen.push(error.code);
      },
    });
    const limiter = createRateLimiter({ policy: perMinute(5), store: guarded, clock: () => now });
    for (let i = 0; i < 4; i++) await codeOf(limiter.limit("a"));
    expect(lines).toEqual([
      "warn [floodgate] The controlled store is failing (STORE_ERROR: The controlled store failed: connection refused). Calls fail until it answers again, and limits follow the store-failure policy meanwhile. Check that the store is reachable from this process, and its address, credentials and load.",
    ]);
    expect(seen).toEqual(["STORE_ERROR", "STORE_ERROR", "STORE_ERROR", "STORE_UNAVAILABLE"]);
    expect(guarded.stats()).toMatchObject({ calls: 4, failures: 4, rejected: 1, timeouts: 0, failing: true, inFlight: 0 });
    now += 1000;
    store.mode = "ok";
    expect((await limiter.limit("a")).allowed).toBe(true);
    expect(lines[1]).toBe("info [floodgate] The controlled store answers again, after failing for 1000 ms; 4 calls failed meanwhile.");
    expect(lines).toHaveLength(2);
    expect(guarded.stats().failing).toBe(false);
  });

  it("the HTTP layer's default fallback logs the failure through its logger", async () => {
    const lines: string[] = [];
    const http = createHttpRateLimiter({
      store: controlledStore("throw"),
      policy: perMinute(5),
      logger: {
        warn: (m) => {
          lines.push(m);
        },
      },
      warnings: false,
    }, ACCESS);
    for (let i = 0; i < 3; i++) expect((await http.decideRequest({}, "192.0.2.1"))?.info.source).toBe("fallback");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      /^\[floodgate\] The controlled store is failing \(STORE_ERROR: .*connection refused\)\. .*Check that the store is reachable/,
    );
  });
});

describe("the circuit breaker probes early and backs off", () => {
  /** Opens `limiter`'s circuit, then for each of `probes` failed probes: how long the store went uncalled before it. */
  async function openPeriods(
    limiter: ReturnType<typeof createRateLimiter>,
    store: ReturnType<typeof controlledStore>,
    advance: (ms: number) => void,
    probes: number,
  ) {
    for (let i = 0; i < 5; i++) expect(await codeOf(limiter.limit("a"))).toBe("STORE_ERROR");
    const openFor: number[] = [];
    for (let probe = 0; probe < probes; probe++) {
      const before = store.calls;
      let waited = 0;
      while (store.calls === before) {
        expect(await codeOf(limiter.limit("a"))).toBe(store.calls === before ? "STORE_UNAVAILABLE" : "STORE_ERROR");
        if (store.calls === before) {
          advance(250);
          waited += 250;
        }
      }
      openFor.push(waited);
    }
    return openFor;
  }

  it("default: opens after 5 failures and probes every second however long the outage; one successful probe closes it", async () => {
    let now = 1_000_000;
    const store = controlledStore("throw");
    const limiter = createRateLimiter({ policy: perMinute(100), store, clock: () => now, resilience: { logger: false } });
    // A 60 s outage: the store goes uncalled for 1 s before each probe, never longer.
    expect(await openPeriods(limiter, store, (ms) => (now += ms), 60)).toEqual(Array(60).fill(1000));
    // Back at the last probe's failure: the next probe, 1 s later, closes the circuit.
    store.mode = "ok";
    expect(await codeOf(limiter.limit("a"))).toBe("STORE_UNAVAILABLE");
    now += 1000;
    expect((await limiter.limit("a")).allowed).toBe(true);
    expect((await limiter.limit("a")).allowed).toBe(true);
    // Closed again: 5 failures open it for 1 s.
    store.mode = "throw";
    for (let i = 0; i < 5; i++) await codeOf(limiter.limit("a"));
    const calls = store.calls;
    now += 999;
    expect(await codeOf(limiter.limit("a"))).toBe("STORE_UNAVAILABLE");
    now += 1;
    expect(await codeOf(limiter.limit("a"))).toBe("STORE_ERROR");
    expect(store.calls).toBe(calls + 1);
  });

  it("maxCooldownMs: each failed probe doubles the cool-down up to it; the back-off starts over once closed", async () => {
    let now = 1_000_000;
    const store = controlledStore("throw");
    const limiter = createRateLimiter({
      policy: perMinute(100),
      store,
      clock: () => now,
      resilience: { logger: false, circuitBreaker: { maxCooldownMs: 30_000 } },
    });
    expect(await openPeriods(limiter, store, (ms) => (now += ms), 7)).toEqual([1000, 2000, 4000, 8000, 16000, 30000, 30000]);
    now += 30_000;
    store.mode = "ok";
    expect((await limiter.limit("a")).allowed).toBe(true);
    store.mode = "throw";
    expect(await openPeriods(limiter, store, (ms) => (now += ms), 2)).toEqual([1000, 2000]);
  });

  it("exactly one probe is in flight; the others fail at once with STORE_UNAVAILABLE", async () => {
    let now = 1_000_000;
    const store = controlledStore("throw");
    const limiter = createRateLimiter({
      policy: perMinute(100),
      store,
      clock: () => now,
      resilience: { circuitBreaker: { failures: 1 }, timeoutMs: false, logger: false },
    });
    await codeOf(limiter.limit("a"));
    now += 1000;
    store.mode = "hang";
    const probe = limiter.limit("a");
    const others = await Promise.all(Array.from({ length: 20 }, () => codeOf(limiter.limit("a"))));
    expect(others).toEqual(Array(20).fill("STORE_UNAVAILABLE"));
    expect(store.calls).toBe(2);
    store.hanging[0]!.release();
    expect((await probe).allowed).toBe(true);
    store.mode = "ok";
    expect((await limiter.limit("a")).allowed).toBe(true);
  });
});

describe("calls in flight are bounded", () => {
  it("a stalled store under 5,000 concurrent calls: at most 1,000 reach it, and every call is answered by its deadline", async () => {
    const store = controlledStore("hang");
    const guarded = resilientStore(store, { timeoutMs: 200, circuitBreaker: false, logger: false });
    const limiter = createRateLimiter({ policy: perMinute(100), store: guarded });
    const started = performance.now();
    const answers = Array.from({ length: 5000 }, () => codeOf(limiter.limit("a")));
    expect(guarded.stats().inFlight).toBe(1000);
    const codes = await Promise.all(answers);
    expect(performance.now() - started).toBeLessThan(1000);
    expect(codes.filter((c) => c === "STORE_TIMEOUT")).toHaveLength(1000);
    expect(codes.filter((c) => c === "STORE_UNAVAILABLE")).toHaveLength(4000);
    expect(store.maxUnsettled).toBe(1000);
    // Abandoned calls still occupy the store until they settle: new calls are refused meanwhile.
    expect(await codeOf(limiter.limit("a"))).toBe("STORE_UNAVAILABLE");
    for (const h of store.hanging) h.fail(new Error("late"));
    await settle();
    expect(guarded.stats().inFlight).toBe(0);
  });

  it("the HTTP layer, breaker off: requests beyond the bound get the failure policy at once", async () => {
    const store = controlledStore("hang");
    const http = createHttpRateLimiter({
      store,
      policy: perMinute(100),
      circuitBreaker: false,
      timeoutMs: 300,
      onStoreError: "allow",
      logger: { warn: () => {} },
      warnings: false,
    }, ACCESS);
    const started = performance.now();
    const results = await Promise.all(Array.from({ length: 3000 }, () => http.decideRequest({}, "192.0.2.1")));
    expect(performance.now() - started).toBeLessThan(1500);
    expect(results.every((r) => r?.info.source === "allow")).toBe(true);
    expect(store.maxUnsettled).toBe(1000);
    const codes = results.map((r) => r?.info.storeError?.code);
    expect(codes.filter((c) => c === "STORE_UNAVAILABLE")).toHaveLength(2000);
    for (const h of store.hanging) h.release();
  });
});

describe("cold start", () => {
  it("timeouts before the store's first answer do not open the breaker; after it, they count", async () => {
    const now = 1_000_000;
    const store = controlledStore("hang");
    const guarded = resilientStore(store, { timeoutMs: 20, circuitBreaker: { failures: 1 }, logger: false });
    const limiter = createRateLimiter({ policy: perMinute(100), store: guarded, clock: () => now });
    expect(await Promise.all([codeOf(limiter.limit("a")), codeOf(limiter.limit("b"))])).toEqual(["STORE_TIMEOUT", "STORE_TIMEOUT"]);
    expect(guarded.openForMs(now)).toBe(0);
    expect(guarded.stats()).toMatchObject({ timeouts: 2, failing: false });
    store.mode = "ok";
    expect((await limiter.limit("a")).allowed).toBe(true);
    store.mode = "hang";
    expect(await codeOf(limiter.limit("a"))).toBe("STORE_TIMEOUT");
    // Open for 1 s from the deadline (20 ms after the call).
    expect(guarded.openForMs(now + 20)).toBe(1000);
    expect(guarded.stats().failing).toBe(true);
    for (const h of store.hanging) h.release();
  });

  it("a store that only times out from the start opens the breaker once the warm-up (10 s) is over", async () => {
    let now = 1_000_000;
    const store = controlledStore("hang");
    const guarded = resilientStore(store, { timeoutMs: 10, circuitBreaker: { failures: 1 }, logger: false });
    const limiter = createRateLimiter({ policy: perMinute(100), store: guarded, clock: () => now });
    await codeOf(limiter.limit("a"));
    expect(guarded.openForMs(now)).toBe(0);
    now += 10_000;
    await codeOf(limiter.limit("a"));
    expect(guarded.openForMs(now + 10)).toBeGreaterThan(0);
    for (const h of store.hanging) h.release();
  });
});

describe("abandoned consumes", () => {
  it("a consume the store admits after its deadline is given back once, into what it was charged in; a late denial is not counted", async () => {
    const store = controlledStore("ok");
    const guarded = resilientStore(store, { timeoutMs: 20, logger: false });
    const limiter = createRateLimiter({ policy: perMinute(1), store: guarded });
    store.mode = "hang";
    expect(await codeOf(limiter.limit("a"))).toBe("STORE_TIMEOUT");
    store.hanging[0]!.release();
    await settle();
    expect(guarded.stats()).toMatchObject({ lateCharges: 1, lateRefunds: 1 });
    // The request got the timeout: its unit is back, so the limit of 1 is whole again.
    store.mode = "ok";
    expect((await limiter.peek("a")).remaining).toBe(1);
    // A late denial charged nothing: nothing to give back, nothing counted.
    expect((await limiter.limit("a")).allowed).toBe(true);
    store.mode = "hang";
    expect(await codeOf(limiter.limit("a"))).toBe("STORE_TIMEOUT");
    store.hanging[1]!.release();
    await settle();
    expect(guarded.stats()).toMatchObject({ lateCharges: 1, lateRefunds: 1 });
    // The abandoned call's settling is not a success: no recovery, the caller got its timeout.
    expect(guarded.stats()).toMatchObject({ timeouts: 2, inFlight: 0 });
  });

  it("the store is told a call was abandoned (its signal is aborted at the deadline)", async () => {
    const signals: Array<{ aborted: boolean } | undefined> = [];
    const inner = memoryStore();
    const store: RateLimitStore = {
      name: "watching",
      consume: (set, key, cost, nowMs, signal) => {
        signals.push(signal);
        return new Promise((resolve) => setTimeout(() => resolve(inner.consume(set, key, cost, nowMs)), 60));
      },
      peek: (...args) => inner.peek(...args),
      refund: (...args) => inner.refund(...args),
      reset: (...args) => inner.reset(...args),
    };
    const limiter = createRateLimiter({ policy: perMinute(5), store, resilience: { timeoutMs: 20, logger: false } });
    expect(await codeOf(limiter.limit("a"))).toBe("STORE_TIMEOUT");
    expect(signals[0]?.aborted).toBe(true);
    const fast = createRateLimiter({ policy: perMinute(5), store, resilience: { timeoutMs: 500, logger: false } });
    await fast.limit("a");
    expect(signals[1]?.aborted).toBe(false);
  });
});

describe("events", () => {
  it("tells each failure, the circuit opening, and its recovery with how long it was open", async () => {
    let now = 1_000_000;
    const store = controlledStore("throw");
    const told: string[] = [];
    const guarded = resilientStore(store, {
      circuitBreaker: { failures: 2, cooldownMs: 1000 },
      logger: false,
      events: {
        failure: (name, error) => void told.push(`failure ${name} ${error.code}`),
        circuitOpened: (name, ms) => void told.push(`opened ${name} ${ms}`),
        circuitClosed: (name, ms) => void told.push(`closed ${name} ${ms}`),
      },
    });
    const limiter = createRateLimiter({ policy: perMinute(5), store: guarded, clock: () => now });
    for (let i = 0; i < 3; i++) await limiter.limit("a").catch(() => undefined);
    now += 1000;
    await limiter.limit("a").catch(() => undefined); // the probe fails: reopened, for the cool-down again
    now += 1000;
    store.mode = "ok";
    expect((await limiter.limit("a")).allowed).toBe(true);
    expect(told).toEqual([
      "failure controlled STORE_ERROR",
      "opened controlled 1000",
      "failure controlled STORE_ERROR",
      "failure controlled STORE_UNAVAILABLE",
      "opened controlled 1000",
      "failure controlled STORE_ERROR",
      "closed controlled 2000",
    ]);
  });

  it("an observer that throws changes no call's outcome", async () => {
    const store = controlledStore("throw");
    const guarded = resilientStore(store, {
      logger: false,
      events: {
        failure: () => {
          throw new Error("observer bug");
        },
      },
    });
    const limiter = createRateLimiter({ policy: perMinute(5), store: guarded });
    await expect(limiter.limit("a")).rejects.toMatchObject({ code: "STORE_ERROR" });
  });

  it("refuses events that are not an object of functions", () => {
    expect(() => resilientStore(memoryStore(), { events: { failure: 1 } as never })).toThrow(/events/);
    expect(() => createHttpRateLimiter({ policy: perMinute(1), storeEvents: "no" as never }, ACCESS)).toThrow(/storeEvents/);
  });
});
