/**
 * Connection faults the store must get out of on its own, against real redis-server processes:
 * a connection gone half-open (a hop that silently stops forwarding while new connections work),
 * a server not up yet at startup, and an address that accepts connections but never answers.
 */
import { Redis as IORedis } from "ioredis";
import { createClient } from "redis";
import { afterEach, describe, expect, it } from "vitest";
import { createRateLimiter, FloodgateError, redisStore, resilientStore } from "../../packages/core/src/index.ts";
import { type RedisInstance, startRedis } from "../support/redis-server.ts";
import { freePort, startBlackHole, startTcpProxy, type TcpProxy } from "../support/tcp-proxy.ts";
import { clearOfHourBoundary, hourly, uniquePrefix } from "../stores/store-contract.ts";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) {
    try {
      await c();
    } catch {
      // gone already
    }
  }
});

/** Calls `limit` every `everyMs` until one is answered by the store or `withinMs` pass; the ms that took, or undefined. */
async function backOnStore(limit: () => Promise<{ source: string }>, withinMs: number, everyMs = 25): Promise<number | undefined> {
  const started = performance.now();
  while (performance.now() - started < withinMs) {
    const source = await limit().then((d) => d.source, () => "failed");
    if (source === "store") return performance.now() - started;
    await sleep(everyMs);
  }
  return undefined;
}

describe("a connection gone half-open", () => {
  let redis: RedisInstance;
  let proxy: TcpProxy;

  const clients = {
    ioredis: async (port: number) => {
      const c = new IORedis(port, "127.0.0.1");
      c.on("error", () => undefined);
      await c.ping();
      return { client: c, close: () => c.disconnect() };
    },
    "node-redis": async (port: number) => {
      const c = createClient({ socket: { port, host: "127.0.0.1" } });
      c.on("error", () => undefined);
      await c.connect();
      return { client: c, close: () => c.destroy() };
    },
  };

  it.each(Object.keys(clients) as (keyof typeof clients)[])(
    "%s: once the circuit opens on timeouts, the store moves to a fresh connection and decides again within the cool-down and a deadline",
    async (kind) => {
      await clearOfHourBoundary();
      redis = await startRedis();
      cleanups.push(() => redis.stop());
      proxy = await startTcpProxy(redis.port);
      cleanups.push(() => proxy.close());
      const { client, close } = await clients[kind](proxy.port);
      cleanups.push(close);
      const lines: string[] = [];
      const store = resilientStore(redisStore({ client: client as never, denyCache: false }), {
        timeoutMs: 200,
        circuitBreaker: { failures: 3, cooldownMs: 300 },
        logger: { warn: (m) => lines.push(m), info: (m) => lines.push(m) },
      });
      cleanups.push(() => store.dispose?.());
      const limiter = createRateLimiter({ policy: hourly("fixed-window", 1000), store, prefix: uniquePrefix() });
      expect((await limiter.limit("k")).source).toBe("store");
      const before = proxy.accepted;

      proxy.freezeExisting();
      // Three timeouts open the circuit; then the next probe goes down a new connection.
      const took = await backOnStore(() => limiter.limit("k"), 8000);
      expect(took, "decisions back on the store").toBeDefined();
      // Timeouts (3 × 200 ms), the cool-down (300 ms), a failed probe at most, and a connection.
      expect(took!).toBeLessThan(3000);
      expect(proxy.accepted).toBeGreaterThan(before);
      expect(lines[0]).toMatch(/store is failing \(STORE_TIMEOUT/);
      expect(lines.at(-1)).toMatch(/answers again/);
      // The connection the app passed is left as it is (never closed by the store).
      if (kind === "ioredis") expect((client as IORedis).status).toBe("ready");
      else expect((client as ReturnType<typeof createClient>).isOpen).toBe(true);
    },
    20_000,
  );

  it("reconnect: false keeps the store on the client's connection (the circuit keeps probing it)", async () => {
    redis = await startRedis();
    cleanups.push(() => redis.stop());
    proxy = await startTcpProxy(redis.port);
    cleanups.push(() => proxy.close());
    const { client, close } = await clients.ioredis(proxy.port);
    cleanups.push(close);
    const store = resilientStore(redisStore({ client, denyCache: false, reconnect: false }), {
      timeoutMs: 200,
      circuitBreaker: { failures: 3, cooldownMs: 300 },
      logger: false,
    });
    const limiter = createRateLimiter({ policy: hourly("fixed-window", 1000), store, prefix: uniquePrefix() });
    expect((await limiter.limit("k")).source).toBe("store");
    const before = proxy.accepted;
    proxy.freezeExisting();
    expect(await backOnStore(() => limiter.limit("k"), 2000)).toBeUndefined();
    expect(proxy.accepted).toBe(before);
  }, 20_000);
});

describe("a store unreachable at startup", () => {
  it(
    "ioredis, redis-server up 3 s after the first request: the first failure is logged at once, requests do not wait for the deadline, decisions back on the store soon after it is up",
    async () => {
      await clearOfHourBoundary(20_000);
      const port = await freePort();
      const client = new IORedis(port, "127.0.0.1");
      client.on("error", () => undefined);
      cleanups.push(() => client.disconnect());
      const lines: { atMs: number; line: string }[] = [];
      const started = performance.now();
      const store = resilientStore(redisStore({ client, denyCache: false }), {
        logger: { warn: (line) => lines.push({ atMs: performance.now() - started, line }) },
      });
      const limiter = createRateLimiter({ policy: hourly("fixed-window", 1000), store, prefix: uniquePrefix() });
      // 120 requests over 3 s, each on its own (as an app's requests are).
      const waits: number[] = [];
      const requests: Promise<void>[] = [];
      for (let i = 0; i < 120; i++) {
        const sent = performance.now();
        requests.push(
          limiter.limit("k").then(() => undefined, (e: unknown) => {
            expect(e).toBeInstanceOf(FloodgateError);
          }).then(() => {
            waits.push(performance.now() - sent);
          }),
        );
        await sleep(25);
      }
      const redis = await startRedis({ port });
      cleanups.push(() => redis.stop());
      const upAt = performance.now();
      await Promise.all(requests);
      expect(lines.length).toBeGreaterThan(0);
      expect(lines[0]!.atMs, "the first failure logged at once").toBeLessThan(500);
      expect(lines[0]!.line).toMatch(/cannot reach the server/);
      // Failed at once: not the full 1,000 ms deadline each.
      const slow = waits.filter((w) => w >= 900).length;
      expect(slow, `requests that waited the deadline (of ${waits.length})`).toBeLessThanOrEqual(2);
      const took = await backOnStore(() => limiter.limit("k"), 5000);
      expect(took, "back on the store once redis-server is up").toBeDefined();
      // The client's reconnection back-off (at most ~0.6 s this early) and the cool-down (1 s).
      expect(performance.now() - upAt).toBeLessThan(4000);
    },
    30_000,
  );

  it(
    "an address that accepts connections and never answers: after the first deadline, one request at a time waits for it, the others fail at once, and the first timeout is logged",
    async () => {
      const hole = await startBlackHole();
      cleanups.push(() => hole.close());
      const client = new IORedis(hole.port, "127.0.0.1", { maxRetriesPerRequest: null });
      client.on("error", () => undefined);
      cleanups.push(() => client.disconnect());
      const lines: { atMs: number; line: string }[] = [];
      const started = performance.now();
      const store = resilientStore(redisStore({ client, denyCache: false }), {
        timeoutMs: 500,
        logger: { warn: (line) => lines.push({ atMs: performance.now() - started, line }) },
      });
      const limiter = createRateLimiter({ policy: hourly("fixed-window", 1000), store, prefix: uniquePrefix() });
      const codes: string[] = [];
      const waits: { sentMs: number; waitedMs: number }[] = [];
      const requests: Promise<void>[] = [];
      for (let i = 0; i < 80; i++) {
        const sent = performance.now();
        requests.push(
          limiter.limit("k").then(() => {
            codes.push("ok");
          }, (e: unknown) => {
            codes.push((e as FloodgateError).code);
          }).then(() => {
            waits.push({ sentMs: sent - started, waitedMs: performance.now() - sent });
          }),
        );
        await sleep(25);
      }
      await Promise.all(requests);
      expect(codes.filter((c) => c === "ok")).toEqual([]);
      // Until the first deadline nothing is known, and every request sent meanwhile waits for it.
      // After it, one request at a time is sent (and waits); the others fail at once: over 1.5 s
      // with a 500 ms deadline, about 3 waited instead of 60.
      const later = waits.filter((w) => w.sentMs > 600);
      expect(later.length).toBeGreaterThan(50);
      expect(later.filter((w) => w.waitedMs >= 450).length).toBeLessThanOrEqual(4);
      expect(codes.filter((c) => c === "STORE_UNAVAILABLE").length).toBeGreaterThan(45);
      expect(lines[0]!.line).toMatch(/has not answered yet/);
      expect(lines[0]!.atMs).toBeLessThan(1000);
    },
    30_000,
  );
});
