// The instrumented store: it keeps the whole store contract (around the memory store); around a
// real Redis it puts a child span on each call and, through the HTTP layer's storeEvents, counts
// failures by code, the circuit opening and recovering, and late charges given back (the server
// is paused with SIGSTOP, then resumed). Leases and reservations are counted from the answers.
//   npx vitest run test/opentelemetry/store.test.ts
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Redis as IORedis } from "ioredis";
import { createRateLimiter, fixedWindow, memoryStore, redisStore } from "@floodgate/core";
import { ATTRIBUTES as A, floodgateTelemetry, METRICS } from "@floodgate/opentelemetry";
import { storeContract } from "@floodgate/testing";
import { type RedisInstance, startRedis } from "../support/redis-server.ts";
import { hono } from "../http/targets.ts";
import { ioredisHarness } from "../redis/harness.ts";
import { createSdk } from "./sdk.ts";

// As the memory store's own contract run: it leases nothing, and its instances share nothing.
storeContract("memoryStore() through instrumentStore()", async () => {
  const sdk = createSdk();
  const telemetry = floodgateTelemetry({ meterProvider: sdk.meterProvider, tracerProvider: sdk.tracerProvider });
  return { store: () => telemetry.instrumentStore(memoryStore()), close: async () => undefined };
}, { leases: false, clients: false });

// The whole contract, leases and racing clients included, around a real Redis, spans recorded.
storeContract("redisStore (ioredis) through instrumentStore()", async () => {
  const harness = await ioredisHarness();
  const sdk = createSdk();
  const telemetry = floodgateTelemetry({ meterProvider: sdk.meterProvider, tracerProvider: sdk.tracerProvider });
  return { ...harness, store: (clock) => telemetry.instrumentStore(harness.store(clock)) };
});

const policy = fixedWindow({ limit: 100, window: "1h", name: "hourly" });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("around a real Redis", () => {
  let redis: RedisInstance;
  let client: IORedis;
  beforeAll(async () => {
    redis = await startRedis();
    client = new IORedis(redis.port, redis.host, { maxRetriesPerRequest: 1, enableOfflineQueue: true });
  });
  afterAll(async () => {
    client?.disconnect();
    await redis?.stop();
  });

  it("a child span per store call, under the request's span", async () => {
    const sdk = createSdk();
    const telemetry = floodgateTelemetry({ meterProvider: sdk.meterProvider, tracerProvider: sdk.tracerProvider });
    const app = await hono.start(telemetry.instrument({ store: redisStore({ client }), prefix: `otel-span-${Date.now()}:`, policy }));
    const tracer = sdk.tracerProvider.getTracer("test");
    await tracer.startActiveSpan("GET /api/x", async (span) => {
      expect((await app.send("/api/x")).status).toBe(200);
      span.end();
    });
    const spans = sdk.spans.getFinishedSpans();
    const request = spans.find((s) => s.name === "GET /api/x")!;
    const call = spans.find((s) => s.name === "floodgate.store.consume")!;
    expect(call.parentSpanContext?.spanId).toBe(request.spanContext().spanId);
    expect(call.attributes).toMatchObject({ [A.store]: "redis", [A.operation]: "consume" });
    expect(request.attributes).toMatchObject({ [A.store]: "redis", [A.source]: "store", [A.outcome]: "allowed" });
    expect(await sdk.sum(METRICS.decisions, { [A.store]: "redis", [A.outcome]: "allowed" })).toBe(1);
  });

  it("failures by code, the circuit opening and recovering, late charges given back", async () => {
    const sdk = createSdk();
    const telemetry = floodgateTelemetry({ meterProvider: sdk.meterProvider, tracerProvider: sdk.tracerProvider });
    const app = await hono.start(telemetry.instrument({
      store: redisStore({ client }),
      prefix: `otel-fail-${Date.now()}:`,
      policy,
      timeoutMs: 1000,
      circuitBreaker: { failures: 2, cooldownMs: 200 },
      logger: { warn: () => undefined },
    }));
    expect((await app.send("/api/x")).status).toBe(200); // the store has answered once: no cold start
    redis.kill("SIGSTOP");
    try {
      for (let i = 0; i < 4; i++) expect((await app.send("/api/x")).status).toBe(200); // the fallback limiter
    } finally {
      redis.kill("SIGCONT");
    }
    expect(await sdk.sum(METRICS.storeFailures, { [A.store]: "redis", [A.errorType]: "STORE_TIMEOUT" })).toBe(2);
    expect(await sdk.sum(METRICS.storeFailures, { [A.store]: "redis", [A.errorType]: "STORE_UNAVAILABLE" })).toBe(2);
    expect(await sdk.sum(METRICS.circuitOpenings, { [A.store]: "redis" })).toBe(1);
    expect(await sdk.sum(METRICS.circuitOpen, { [A.store]: "redis" })).toBe(1);
    expect(await sdk.sum(METRICS.decisions, { [A.source]: "fallback" })).toBe(4);
    await sleep(250);
    expect((await app.send("/api/x")).status).toBe(200); // the probe
    expect(await sdk.sum(METRICS.circuitRecoveries, { [A.store]: "redis" })).toBe(1);
    expect(await sdk.sum(METRICS.circuitOpen, { [A.store]: "redis" })).toBe(0);
    // The two timed-out consumes were admitted once Redis resumed, and given back.
    for (let i = 0; i < 50 && (await sdk.sum(METRICS.lateCharges)) < 2; i++) await sleep(20);
    expect(await sdk.sum(METRICS.lateCharges, { [A.store]: "redis", [A.lateChargeResult]: "returned" })).toBe(2);
  });

  it("leases granted, refreshed and returned", async () => {
    const sdk = createSdk();
    const telemetry = floodgateTelemetry({ meterProvider: sdk.meterProvider });
    const store = redisStore({ client });
    const app = await hono.start(
      telemetry.instrument({ store, prefix: `otel-lease-${Date.now()}:`, policy, mode: "leased", leaseMs: 1000 }),
    );
    for (let i = 0; i < 30; i++) {
      expect((await app.send("/api/x")).status).toBe(200);
      await sleep(5);
    }
    await app.handle.flush();
    expect(await sdk.sum(METRICS.leases, { [A.store]: "redis", [A.leaseAction]: "granted" })).toBeGreaterThanOrEqual(1);
    expect(await sdk.sum(METRICS.decisions, { [A.source]: "lease" })).toBeGreaterThan(0);
    const leases = await sdk.sum(METRICS.leases, { [A.leaseAction]: "refreshed" }) +
      await sdk.sum(METRICS.leases, { [A.leaseAction]: "returned" });
    expect(leases).toBeGreaterThan(0);
  });
});

describe("reservations", () => {
  it("settled, and expired: a settlement after the ttl finds none", async () => {
    const sdk = createSdk();
    const telemetry = floodgateTelemetry({ meterProvider: sdk.meterProvider });
    let now = 1_700_000_000_000;
    const limiter = createRateLimiter({ policy, store: telemetry.instrumentStore(memoryStore()), clock: () => now });
    const settled = await limiter.reserve("k", { estimate: 3 });
    expect(await settled.settle(2)).toBe(true);
    const expired = await limiter.reserve("k", { estimate: 3, ttl: "1s" });
    now += 5_000;
    expect(await limiter.settle("k", { id: expired.id, actual: 1 })).toBe(false);
    expect(await sdk.sum(METRICS.reservations, { [A.store]: "memory", [A.reservationResult]: "settled" })).toBe(1);
    expect(await sdk.sum(METRICS.reservations, { [A.store]: "memory", [A.reservationResult]: "expired" })).toBe(1);
  });
});
