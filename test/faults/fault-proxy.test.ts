/**
 * The fault proxy (test/support/fault-proxy.ts) in front of the local Upstash bridge, with the
 * real @upstash/redis client: each fault does what it says, and a late charge whose refund meets
 * a fault stays charged and is counted (`lateRefundsFailed`), never silently lost.
 */
import { Redis as UpstashRedis } from "@upstash/redis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startUpstashBridge, type UpstashBridge } from "@floodgate/upstash-local";
import { createRateLimiter, FloodgateError, resilientStore, upstashStore } from "../../packages/core/src/index.ts";
import { type FaultProxy, startFaultProxy } from "../support/fault-proxy.ts";
import { type RedisInstance, startRedis } from "../support/redis-server.ts";
import { clearOfHourBoundary, hourly, uniquePrefix } from "../stores/store-contract.ts";

let redis: RedisInstance;
let bridge: UpstashBridge;
let proxy: FaultProxy;
let client: UpstashRedis;
let direct: UpstashRedis;
beforeAll(async () => {
  redis = await startRedis();
  bridge = await startUpstashBridge({ redis: { host: redis.host, port: redis.port } });
  proxy = await startFaultProxy(bridge.url);
  client = new UpstashRedis({ url: proxy.url, token: bridge.token, enableTelemetry: false, retry: { retries: 0 } });
  direct = new UpstashRedis({ url: bridge.url, token: bridge.token, enableTelemetry: false });
});
afterAll(async () => {
  await proxy?.close();
  await bridge?.stop();
  await redis?.stop();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("the fault proxy", () => {
  it("forwards as it is without a fault", async () => {
    await client.set("k", "1");
    expect(await direct.get("k")).toBe(1);
  });

  it('"500": answers HTTP 500 and the command never runs', async () => {
    proxy.set({ kind: "500" });
    await expect(client.incr("n500")).rejects.toThrow(/injected: internal server error/);
    proxy.set({ kind: "none" });
    expect(await direct.get("n500")).toBeNull();
  });

  it('"500-after-run": the command runs, and the client gets a 500', async () => {
    const before = proxy.counts.lostAfterRun;
    proxy.set({ kind: "500-after-run" });
    await expect(client.incr("nAfter")).rejects.toThrow(/after the command ran/);
    proxy.set({ kind: "none" });
    expect(await direct.get("nAfter")).toBe(1);
    expect(proxy.counts.lostAfterRun).toBe(before + 1);
  });

  it('"garbage": a 200 whose body is not JSON is an error, and the command never runs', async () => {
    proxy.set({ kind: "garbage" });
    await expect(client.incr("nGarbage")).rejects.toThrow();
    proxy.set({ kind: "none" });
    expect(await direct.get("nGarbage")).toBeNull();
  });

  it('"slow": the command runs at once, its reply comes delayMs later', async () => {
    proxy.set({ kind: "slow", delayMs: 300 });
    const started = performance.now();
    const reply = client.incr("nSlow");
    await sleep(100);
    expect(await direct.get("nSlow")).toBe(1);
    expect(await reply).toBe(1);
    expect(performance.now() - started).toBeGreaterThanOrEqual(295);
    proxy.set({ kind: "none" });
  });
});

/**
 * One limiter through a resilient store with a 300 ms deadline (what the faults meet), and the
 * same limiter on the bare store for setting up and reading (no deadline a busy machine could miss).
 */
function limiters() {
  const inner = upstashStore({ redis: client });
  const store = resilientStore(inner, { timeoutMs: 300, logger: false });
  const prefix = uniquePrefix();
  const policy = hourly("fixed-window", 10);
  return {
    store,
    limiter: createRateLimiter({ policy, store, prefix }),
    unguarded: createRateLimiter({ policy, store: inner, prefix, resilience: false }),
  };
}

describe("a late charge whose refund fails", () => {
  it("stays charged and is counted in lateRefundsFailed (the refund is not retried: it may have run)", async () => {
    await clearOfHourBoundary();
    const { limiter, unguarded, store } = limiters();
    expect((await unguarded.limit("a")).remaining).toBe(9); // the script is loaded
    proxy.set({ kind: "slow", delayMs: 1000 });
    const error = await limiter.limit("a").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(FloodgateError);
    expect((error as FloodgateError).code).toBe("STORE_TIMEOUT");
    // The charge's late answer arrives while the store answers 500: its refund fails.
    proxy.set({ kind: "500" });
    const deadline = Date.now() + 5000;
    while (store.stats().lateRefundsFailed === 0 && Date.now() < deadline) await sleep(10);
    proxy.set({ kind: "none" });
    expect(store.stats()).toMatchObject({ lateCharges: 1, lateRefunds: 0, lateRefundsFailed: 1, inFlight: 0 });
    expect((await unguarded.peek("a")).remaining).toBe(8);
  });

  it("and one whose refund succeeds is given back (lateRefunds)", async () => {
    const { limiter, unguarded, store } = limiters();
    expect((await unguarded.limit("a")).remaining).toBe(9);
    proxy.set({ kind: "slow", delayMs: 1000 });
    await expect(limiter.limit("a")).rejects.toMatchObject({ code: "STORE_TIMEOUT" });
    proxy.set({ kind: "none" });
    const deadline = Date.now() + 5000;
    while (store.stats().lateRefunds === 0 && Date.now() < deadline) await sleep(10);
    expect(store.stats()).toMatchObject({ lateCharges: 1, lateRefunds: 1, lateRefundsFailed: 0 });
    expect((await unguarded.peek("a")).remaining).toBe(9);
  });
});
