/**
 * The resilient store against real redis-server processes paused with SIGSTOP (by pid): every
 * call answered by its deadline, calls in flight bounded, no EVAL for an abandoned call, and a
 * slow cold start that does not open the breaker.
 */
import { Redis as IORedis } from "ioredis";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { concurrency, createRateLimiter, fixedWindow, FloodgateError, redisStore, resilientStore } from "../../packages/core/src/index.ts";
import { createHttpRateLimiter } from "../../packages/core/src/http/index.ts";
import { type RedisInstance, startRedis } from "../support/redis-server.ts";
import { clearOfHourBoundary, hourly, uniquePrefix } from "../stores/store-contract.ts";

const ACCESS = { method: () => "GET", path: () => "/x", header: () => undefined };
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const codeOf = (p: Promise<unknown>) => p.then(() => "ok", (e: unknown) => (e instanceof FloodgateError ? e.code : String(e)));

async function until(condition: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await sleep(10);
  }
}

/** How many times the server has run EVAL (not EVALSHA) so far. */
async function evalCalls(admin: IORedis): Promise<number> {
  const info = await admin.info("commandstats");
  return Number(/cmdstat_eval:calls=(\d+)/.exec(info)?.[1] ?? 0);
}

let redis: RedisInstance;
let client: IORedis;
let admin: IORedis;
beforeEach(async () => {
  await clearOfHourBoundary();
  redis = await startRedis();
  client = new IORedis(redis.port, redis.host);
  admin = new IORedis(redis.port, redis.host);
  await Promise.all([client.ping(), admin.ping()]);
});
afterEach(async () => {
  redis.kill("SIGCONT");
  client.disconnect();
  admin.disconnect();
  await redis.stop();
});

describe("a stalled redis-server (SIGSTOP)", () => {
  it("with the defaults: 3,000 concurrent calls are all answered within the 1,000 ms deadline, at most 1,000 in flight; then it recovers", async () => {
    const lines: string[] = [];
    const store = resilientStore(redisStore({ client, denyCache: false }), {
      logger: {
        warn: (m) => {
          lines.push(m);
        },
      },
    });
    const limiter = createRateLimiter({ policy: hourly("fixed-window", 100_000), store, prefix: uniquePrefix() });
    expect((await limiter.limit("a")).allowed).toBe(true);

    redis.kill("SIGSTOP");
    const started = performance.now();
    const answers = Array.from({ length: 3000 }, () => codeOf(limiter.limit("a")));
    expect(store.stats().inFlight).toBe(1000);
    const codes = await Promise.all(answers);
    const waited = performance.now() - started;
    expect(waited).toBeLessThan(1600);
    expect(codes.filter((c) => c === "STORE_TIMEOUT")).toHaveLength(1000);
    expect(codes.filter((c) => c === "STORE_UNAVAILABLE")).toHaveLength(2000);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^\[floodgate\] The redis store is failing \(STORE_TIMEOUT: The redis store did not answer within 1000 ms/);

    redis.kill("SIGCONT");
    await until(() => store.stats().inFlight === 0);
    // Abandoned, yet run by Redis once it woke up: charged, counted as late charges, and each
    // given back once into the window it went into.
    expect(store.stats().lateCharges).toBe(1000);
    await until(() => store.stats().lateRefunds === 1000);
    // The breaker opened on the timeouts: the probe, 1 s later, closes it.
    await sleep(1100);
    expect((await limiter.limit("a")).allowed).toBe(true);
    // Only the two answered admissions stay charged: the 1,000 late ones went back.
    expect((await limiter.peek("a")).remaining).toBe(100_000 - 2);
    expect(lines).toHaveLength(2);
    expect(lines[1]).toMatch(/^\[floodgate\] The redis store answers again, after failing for \d+ ms; 3000 calls failed meanwhile\.$/);
  });

  it("breaker off: in-flight calls stay at the bound and every call is answered by its deadline", async () => {
    const store = resilientStore(redisStore({ client, denyCache: false }), {
      timeoutMs: 200,
      circuitBreaker: false,
      maxInFlight: 500,
      logger: false,
    });
    const limiter = createRateLimiter({ policy: hourly("sliding-window", 100_000), store, prefix: uniquePrefix() });
    await limiter.limit("a");
    redis.kill("SIGSTOP");
    for (let round = 0; round < 3; round++) {
      const started = performance.now();
      const codes = await Promise.all(Array.from({ length: 2000 }, () => codeOf(limiter.limit("a"))));
      expect(performance.now() - started).toBeLessThan(800);
      expect(store.stats().inFlight).toBeLessThanOrEqual(500);
      // The abandoned calls are still queued in the client: later rounds are refused at once.
      expect(codes.filter((c) => c === "STORE_TIMEOUT")).toHaveLength(round === 0 ? 500 : 0);
      expect(codes.filter((c) => c === "STORE_UNAVAILABLE")).toHaveLength(round === 0 ? 1500 : 2000);
    }
    redis.kill("SIGCONT");
    await until(() => store.stats().inFlight === 0);
    expect((await limiter.limit("a")).allowed).toBe(true);
  });
});

describe("an abandoned call sends no follow-up", () => {
  it("after NOSCRIPT, the EVAL of a call abandoned at its deadline is never sent, so nothing is charged", async () => {
    const store = resilientStore(redisStore({ client, denyCache: false }), { timeoutMs: 100, logger: false });
    const limiter = createRateLimiter({ policy: hourly("fixed-window", 5), store, prefix: uniquePrefix() });
    await limiter.limit("warm"); // the store knows the server holds the charge's script: it sends EVALSHA
    await admin.script("FLUSH");
    const evalsBefore = await evalCalls(admin);
    redis.kill("SIGSTOP");
    expect(await codeOf(limiter.limit("a"))).toBe("STORE_TIMEOUT");
    redis.kill("SIGCONT");
    await until(() => store.stats().inFlight === 0);
    await sleep(50);
    expect(await evalCalls(admin)).toBe(evalsBefore);
    expect(store.stats().lateCharges).toBe(0);
    // The script is still not loaded: this call goes NOSCRIPT → EVAL (counted), and finds nothing charged.
    expect((await limiter.peek("a")).remaining).toBe(5);
    expect(await evalCalls(admin)).toBe(evalsBefore + 1);
  });

  it("a new store's first call (an EVAL) abandoned at its deadline: its late charge is given back", async () => {
    const store = resilientStore(redisStore({ client, denyCache: false }), { timeoutMs: 100, logger: false });
    const limiter = createRateLimiter({ policy: hourly("fixed-window", 5), store, prefix: uniquePrefix() });
    await admin.script("FLUSH");
    redis.kill("SIGSTOP");
    expect(await codeOf(limiter.limit("a"))).toBe("STORE_TIMEOUT");
    redis.kill("SIGCONT");
    await until(() => store.stats().inFlight === 0);
    await until(() => store.stats().lateCharges === 1);
    // Given back: the key has its whole limit again.
    let remaining = -1;
    for (let i = 0; i < 50 && remaining !== 5; i++) {
      remaining = (await limiter.peek("a")).remaining;
      if (remaining !== 5) await sleep(100);
    }
    expect(remaining).toBe(5);
  });
});

describe("cold start", () => {
  it("slow first calls (script not loaded, server slow to answer) time out without opening the breaker", async () => {
    await admin.script("FLUSH");
    const codes: string[] = [];
    const http = createHttpRateLimiter(
      {
        store: redisStore({ client, denyCache: false }),
        policy: hourly("fixed-window", 100),
        prefix: uniquePrefix(),
        timeoutMs: 200,
        circuitBreaker: { failures: 1 },
        onStoreError: (error) => {
          codes.push(error.code);
        },
        logger: { warn: () => {} },
        warnings: false,
      },
      ACCESS,
    );
    redis.kill("SIGSTOP");
    const first = await Promise.all([
      http.decideRequest({}, "192.0.2.1"),
      http.decideRequest({}, "192.0.2.2"),
      http.decideRequest({}, "192.0.2.3"),
    ]);
    expect(first.map((r) => r?.info.source)).toEqual(["fallback", "fallback", "fallback"]);
    expect(codes).toEqual(["STORE_TIMEOUT", "STORE_TIMEOUT", "STORE_TIMEOUT"]);
    redis.kill("SIGCONT");
    await sleep(100);
    // Closed: the store decides (a breaker opened by the timeouts would answer STORE_UNAVAILABLE).
    const next = await http.decideRequest({}, "192.0.2.1");
    expect(next?.info.source).toBe("store");
    expect(codes).toHaveLength(3);
  });
});

describe("an abandoned reservation is cancelled once", () => {
  it("reservations abandoned at their deadline, then admitted by the woken server, are cancelled by id: every unit back, concurrency released, no ledger key left", async () => {
    const store = resilientStore(redisStore({ client, denyCache: false }), { timeoutMs: 150, circuitBreaker: false, logger: false });
    const prefix = uniquePrefix();
    const limiter = createRateLimiter({
      policy: [concurrency({ limit: 50, timeout: "1h" }), fixedWindow({ limit: 1000, window: "1h" })],
      store,
      prefix,
    });
    const kept = await limiter.reserve("a", { estimate: 7 });
    expect(kept.decision.allowed).toBe(true);
    redis.kill("SIGSTOP");
    const codes = await Promise.all(Array.from({ length: 20 }, () => codeOf(limiter.reserve("a", { estimate: 5 }))));
    expect(codes).toEqual(Array.from({ length: 20 }, () => "STORE_TIMEOUT"));
    redis.kill("SIGCONT");
    await until(() => store.stats().inFlight === 0);
    expect(store.stats().lateReservations).toBe(20);
    await until(() => store.stats().lateRefunds === 20);
    // Only the answered reservation holds anything.
    expect((await limiter.peek("a")).policies.map((p) => p.remaining)).toEqual([49, 993]);
    expect(await admin.keys(`${prefix}{a}:r:*`)).toEqual([`${prefix}{a}:r:${kept.id}`]);
    expect(await kept.settle(3)).toBe(true);
    expect((await limiter.peek("a")).policies.map((p) => p.remaining)).toEqual([50, 997]);
  });
});
