/** Faults against real redis-server processes: odd reply shapes, lost replies, restarts. */
import net from "node:net";
import { Redis as UpstashRedis } from "@upstash/redis";
import { Redis as IORedis } from "ioredis";
import { createClient } from "redis";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { createRateLimiter, redisStore, upstashStore } from "../../packages/core/src/index.ts";
import { type RedisInstance, startRedis } from "../support/redis-server.ts";
import { startUpstashBridge } from "@floodgate/upstash-local";
import { clearOfHourBoundary, hourly, uniquePrefix } from "../stores/store-contract.ts";

let redis: RedisInstance;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis?.stop();
});
// Hour windows on the server's clock: counts taken before an hour boundary would not be seen after it.
beforeEach(() => clearOfHourBoundary());

describe("replies of an unexpected shape are a STORE_ERROR, never a decision", () => {
  it("ioredis with stringNumbers: true (integers arrive as strings)", async () => {
    const client = new IORedis(redis.port, redis.host, { stringNumbers: true });
    try {
      for (const policy of [hourly("fixed-window", 2), [hourly("token-bucket", 2), hourly("sliding-window", 5, "b")]]) {
        const limiter = createRateLimiter({ policy, store: redisStore({ client }), prefix: uniquePrefix() });
        // Read as numbers, ["1", "1", ...] would be a denial of a request the store admitted and charged.
        await expect(limiter.limit("a")).rejects.toMatchObject({
          code: "STORE_ERROR",
          message: expect.stringMatching(/^redis store: consume got an unexpected reply from Redis .*expected an array of \d+ integers/),
        });
        await expect(limiter.peek("a")).rejects.toMatchObject({ code: "STORE_ERROR" });
      }
    } finally {
      client.disconnect();
    }
  });

  it("node-redis speaking RESP3 still gets integers: decisions as usual", async () => {
    const client = createClient({ socket: { host: redis.host, port: redis.port }, RESP: 3 });
    await client.connect();
    try {
      const limiter = createRateLimiter({
        policy: [hourly("fixed-window", 2), hourly("sliding-log", 5, "b")],
        store: redisStore({ client }),
        prefix: uniquePrefix(),
      });
      expect((await limiter.limit("a")).allowed).toBe(true);
      expect((await limiter.limit("a")).remaining).toBe(0);
      const denied = await limiter.limit("a");
      expect(denied.allowed).toBe(false);
      expect(denied.retryAfterMs).toBeGreaterThan(0);
    } finally {
      client.destroy();
    }
  });
});

/**
 * A TCP proxy in front of redis-server that can swallow the next reply: the command runs in
 * Redis, then the connection that sent it is cut, as when a gateway fails after the fact.
 */
async function replyDroppingProxy(target: RedisInstance): Promise<{ port: number; dropNextReply(): void; close(): Promise<void> }> {
  let drop = false;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(target.port, target.host);
    sockets.add(client).add(upstream);
    client.on("data", (chunk) => upstream.write(chunk));
    upstream.on("data", (chunk) => {
      if (drop) {
        drop = false;
        client.destroy();
        upstream.destroy();
      } else client.write(chunk);
    });
    const end = (): void => {
      client.destroy();
      upstream.destroy();
    };
    client.on("close", end).on("error", end);
    upstream.on("close", end).on("error", end);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    dropNextReply: () => {
      drop = true;
    },
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

describe("only a NOSCRIPT reply leads to EVAL", () => {
  it('upstash: a failed request whose error text echoes an identifier containing "noscript" is not retried (the script may have run)', async () => {
    const proxy = await replyDroppingProxy(redis);
    const bridge = await startUpstashBridge({ redis: { host: "127.0.0.1", port: proxy.port } });
    try {
      const client = new UpstashRedis({ url: bridge.url, token: bridge.token, enableTelemetry: false, retry: { retries: 0 } });
      const limiter = createRateLimiter({
        policy: hourly("fixed-window", 5),
        store: upstashStore({ redis: client }),
        prefix: uniquePrefix(),
      });
      expect((await limiter.limit("NoScript fan")).remaining).toBe(4); // the script is loaded now
      proxy.dropNextReply();
      const error = await limiter.limit("NoScript fan").catch((e: unknown) => e);
      // The client's message carries the request body, identifier included.
      expect(error).toMatchObject({ code: "STORE_ERROR", message: expect.stringMatching(/redis connection lost.*NoScript fan/) });
      // The script ran once for that call (its reply was lost); an EVAL retry would have charged again.
      expect((await limiter.peek("NoScript fan")).remaining).toBe(3);
    } finally {
      await bridge.stop();
      await proxy.close();
    }
  });

  it("upstash: a real NOSCRIPT still falls back to EVAL, with and without auto-pipelining", async () => {
    const bridge = await startUpstashBridge({ redis: { host: redis.host, port: redis.port } });
    const admin = new IORedis(redis.port, redis.host);
    try {
      for (const enableAutoPipelining of [true, false]) {
        const client = new UpstashRedis({ url: bridge.url, token: bridge.token, enableTelemetry: false, enableAutoPipelining });
        const limiter = createRateLimiter({
          policy: hourly("sliding-window", 5),
          store: upstashStore({ redis: client }),
          prefix: uniquePrefix(),
        });
        await admin.script("FLUSH");
        expect((await limiter.limit("a")).remaining).toBe(4);
        await admin.script("FLUSH");
        expect((await limiter.limit("a")).remaining).toBe(3);
      }
    } finally {
      admin.disconnect();
      await bridge.stop();
    }
  });
});

describe("redis-server killed and restarted", () => {
  it.each([
    ["off (the tests' default): counts are lost", [] as string[], 3],
    ["on (appendfsync always): counts survive", ["--appendonly", "yes", "--appendfsync", "always"], 1],
  ])("persistence %s; calls while it is down reject with STORE_ERROR (no offline queue)", async (_what, args, remainingAfter) => {
    const server = await startRedis({ args });
    const client = new IORedis(server.port, server.host, { enableOfflineQueue: false, maxRetriesPerRequest: 0, lazyConnect: true });
    client.on("error", () => {});
    await client.connect();
    try {
      const limiter = createRateLimiter({
        policy: hourly("fixed-window", 3),
        store: redisStore({ client, denyCache: false }),
        prefix: uniquePrefix(),
      });
      expect((await limiter.limit("a")).remaining).toBe(2);
      expect((await limiter.limit("a")).remaining).toBe(1);
      server.kill("SIGKILL");
      await server.exited();
      await expect(limiter.limit("a")).rejects.toMatchObject({ code: "STORE_ERROR" });
      await server.restart();
      await new Promise<void>((resolve) => (client.status === "ready" ? resolve() : client.once("ready", () => resolve())));
      expect((await limiter.peek("a")).remaining).toBe(remainingAfter);
    } finally {
      client.disconnect();
      await server.stop();
    }
  });
});
