// The login example (examples/login) on every integration — Hono, Express 5 and 4, Koa and the
// fetch wrapper — over the memory store, Redis (ioredis) and Upstash (through the local bridge):
// 5 failed logins per 15 minutes per user and per client address, then an hour's block;
// successful logins are not counted and clear the user's failures. On Redis, a block survives a
// restart of redis-server with persistence on. Time is injected; nothing sleeps.
import type { AddressInfo } from "node:net";
import { createServer, type Server } from "node:http";
import { memoryStore, type RateLimitStore, redisStore, upstashStore } from "@floodgate/core";
import { Redis as UpstashRedis } from "@upstash/redis";
import express from "express";
import express4 from "express4";
import { Redis as IORedis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { expressApp, type Extra, fetchHandler, honoApp, koaApp } from "../../examples/login/apps.ts";
import { startUpstashBridge, type UpstashBridge } from "../../packages/upstash-local/src/index.ts";
import { type RedisInstance, startRedis } from "../support/redis-server.ts";

const T0 = 1_700_000_100_000; // a multiple of 15 minutes: windows start with the test
const MINUTE = 60_000;

type Post = (ip: string, user: string, password: string) => Promise<{ status: number; retryAfter: string | null }>;

interface Started {
  post: Post;
  close(): Promise<void>;
}

async function overHttp(server: Server): Promise<Started> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    async post(ip, user, password) {
      const response = await fetch(`${base}/login`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-forwarded-for": ip },
        body: JSON.stringify({ user, password }),
      });
      await response.text();
      return { status: response.status, retryAfter: response.headers.get("retry-after") };
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const loginRequest = (ip: string, user: string, password: string): Request =>
  new Request("http://localhost/login", {
    method: "POST",
    headers: { "content-type": "application/json", "x-forwarded-for": ip },
    body: JSON.stringify({ user, password }),
  });

const inProcess = (answer: (request: Request) => Promise<Response> | Response): Started => ({
  async post(ip, user, password) {
    const response = await answer(loginRequest(ip, user, password));
    await response.text();
    return { status: response.status, retryAfter: response.headers.get("retry-after") };
  },
  close: async () => {},
});

/** Every integration, behind a trusted proxy on 127.0.0.1 that sends X-Forwarded-For. */
const TARGETS: { name: string; start: (store: RateLimitStore, extra: Extra) => Promise<Started> }[] = [
  {
    name: "hono",
    start: async (store, extra) => {
      const app = honoApp(store, { ...extra, getConnInfo: () => ({ remote: { address: "127.0.0.1" } }) } as Extra);
      return inProcess((request) => app.request(request));
    },
  },
  { name: "express", start: (store, extra) => overHttp(createServer(expressApp(express, store, extra))) },
  { name: "express 4", start: (store, extra) => overHttp(createServer(expressApp(express4 as never, store, extra))) },
  { name: "koa", start: (store, extra) => overHttp(createServer(koaApp(store, extra).callback())) },
  { name: "fetch", start: async (store, extra) => inProcess(fetchHandler(store, extra, () => "127.0.0.1")) },
];

const PASSWORD = "correct horse battery staple";

/**
 * The whole pattern. `restart`, when given, restarts the store's server while a user is blocked:
 * the block must still hold afterwards.
 */
async function loginScenario(post: Post, env: { now: number }, restart?: () => Promise<void>): Promise<void> {
  // Four failures for alice, then her successful login: not counted, and her failures forgotten.
  for (let i = 0; i < 4; i++) expect((await post("10.0.0.1", "alice", "guess")).status).toBe(401);
  expect((await post("10.0.0.2", "alice", PASSWORD)).status).toBe(200);
  // So five more failures, from another address, are all answered (401), not limited.
  for (let i = 0; i < 5; i++) expect((await post("10.0.0.3", "alice", "guess")).status).toBe(401);
  // The sixth attempt, even with the right password and from a fresh address: blocked for an hour.
  expect(await post("10.0.0.4", "alice", PASSWORD)).toEqual({ status: 429, retryAfter: "3600" });
  // Per user: bob, from that same address, is not blocked.
  expect((await post("10.0.0.4", "bob", "guess")).status).toBe(401);
  if (restart !== undefined) await restart();
  // Half an hour on, the 15-minute window has passed, but the block has not.
  env.now += 30 * MINUTE;
  expect(await post("10.0.0.5", "alice", PASSWORD)).toEqual({ status: 429, retryAfter: "1800" });
  env.now += 30 * MINUTE;
  expect((await post("10.0.0.5", "alice", PASSWORD)).status).toBe(200);
  // Per address: five failures from one address for five users, then that address is blocked for everyone.
  for (let i = 0; i < 5; i++) expect((await post("10.0.0.9", `user${i}`, "guess")).status).toBe(401);
  expect(await post("10.0.0.9", "alice", PASSWORD)).toEqual({ status: 429, retryAfter: "3600" });
  expect((await post("10.0.0.10", "alice", PASSWORD)).status).toBe(200);
}

function options(env: { now: number }): Extra {
  return { clock: () => env.now, trustProxy: ["127.0.0.1"], warnings: false };
}

describe.each(TARGETS)("login example on $name", (target) => {
  it("memory store", async () => {
    const env = { now: T0 };
    const app = await target.start(memoryStore(), options(env));
    try {
      await loginScenario(app.post, env);
    } finally {
      await app.close();
    }
  });
});

describe("login example on Redis", () => {
  let redis: RedisInstance;
  let client: IORedis;
  let bridge: UpstashBridge;
  let upstash: UpstashRedis;
  beforeAll(async () => {
    // Persistence on: the counters and the blocks survive a restart.
    redis = await startRedis({ args: ["--appendonly", "yes", "--appendfsync", "always"] });
    client = new IORedis(redis.port, redis.host);
    client.on("error", () => {});
    bridge = await startUpstashBridge({ redis: { host: redis.host, port: redis.port } });
    upstash = new UpstashRedis({ url: bridge.url, token: bridge.token, enableTelemetry: false });
  });
  afterAll(async () => {
    client?.disconnect();
    await bridge?.stop();
    await redis?.stop();
  });
  const ready = (): Promise<void> =>
    new Promise<void>((resolve) => (client.status === "ready" ? resolve() : client.once("ready", () => resolve())));

  describe.each(TARGETS)("$name", (target) => {
    it("ioredis, with redis-server killed and restarted while a user is blocked", async () => {
      await client.flushall();
      const env = { now: T0 };
      const app = await target.start(redisStore({ client, clock: "local" }), options(env));
      try {
        await loginScenario(app.post, env, async () => {
          redis.kill("SIGKILL");
          await redis.exited();
          await redis.restart();
          await ready();
          expect(await client.keys("login:user:*:b")).toHaveLength(1);
        });
      } finally {
        await app.close();
      }
    });

    it("Upstash through the bridge", async () => {
      await client.flushall();
      const env = { now: T0 };
      const app = await target.start(upstashStore({ redis: upstash, clock: "local" }), options(env));
      try {
        await loginScenario(app.post, env);
      } finally {
        await app.close();
      }
    });
  });
});
