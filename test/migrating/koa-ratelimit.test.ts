// koa-ratelimit and Floodgate side by side on the same request traces, on Koa: the Redis driver
// (a sliding log, like Floodgate's slidingLog) on a real Redis, and the memory driver (a window
// from the first hit). koa-ratelimit reads a clock of its own (captured at load, advanced by
// process.hrtime), which no fake reaches: these traces run on the real clock.
import { fixedWindow, redisStore, slidingLog } from "@floodgate/core";
import { rateLimit as floodgate } from "@floodgate/koa";
import { Redis } from "ioredis";
import Koa from "koa";
import ratelimit from "koa-ratelimit";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type RedisInstance, startRedis } from "../support/redis-server.ts";
import { limitApi as after } from "./examples/koa-ratelimit-after.ts";
import { limitApi as before } from "./examples/koa-ratelimit-before.ts";
import { serve, type Served, settled, sleep, statuses, waitForOffset } from "./support.ts";

const CLIENT = { "x-forwarded-for": "203.0.113.7" };
const servers: Served[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await s.close();
});

async function app(install: (app: Koa) => void): Promise<Served> {
  const a = new Koa();
  install(a);
  a.use((ctx) => {
    ctx.body = { items: [] };
  });
  const served = await serve(a.callback());
  servers.push(served);
  return served;
}

interface Seen {
  status: number;
  remaining: string | null;
  reset: string | null;
  retryAfter: string | null;
  body: string;
}
async function send(s: Served): Promise<Seen> {
  const r = await fetch(`${s.base}/api/items`, { headers: CLIENT });
  return {
    status: r.status,
    remaining: r.headers.get("x-ratelimit-remaining"),
    reset: r.headers.get("x-ratelimit-reset"),
    retryAfter: r.headers.get("retry-after"),
    body: await r.text(),
  };
}

describe("koa-ratelimit (Redis driver) → Floodgate slidingLog on Redis (the guide's example)", () => {
  let redis: RedisInstance;
  let client: Redis;
  beforeAll(async () => {
    redis = await startRedis();
    client = new Redis(redis.port, redis.host);
  });
  afterAll(async () => {
    client?.disconnect();
    await redis?.stop();
  });

  it("two instances sharing Redis admit the same 5 of 7, with the same remaining counts and the same 429 text", async () => {
    const traces: Seen[][] = [];
    for (const install of [before, after]) {
      const instances = [await app((a) => install(a, client)), await app((a) => install(a, client))];
      const trace: Seen[] = [];
      for (let i = 0; i < 7; i++) trace.push(await send(instances[i % 2]!));
      traces.push(trace);
    }
    const [peer, ours] = traces as [Seen[], Seen[]];
    expect(peer.map((s) => s.status)).toEqual([200, 200, 200, 200, 200, 429, 429]);
    expect(ours.map((s) => s.status)).toEqual(peer.map((s) => s.status));
    expect(ours.map((s) => s.remaining)).toEqual(peer.map((s) => s.remaining));
    expect(ours.map((s) => s.remaining)).toEqual(["4", "3", "2", "1", "0", "0", "0"]);
    // koa-ratelimit words the wait into its default text; the example sets its own message.
    expect(ours[6]!.body).toBe(peer[6]!.body);
    // Both: X-RateLimit-Reset in epoch seconds, Retry-After in seconds.
    const nowS = Date.now() / 1000;
    for (const s of [peer[6]!, ours[6]!]) {
      expect(Number(s.reset)).toBeGreaterThan(nowS + 55);
      expect(Number(s.reset)).toBeLessThanOrEqual(nowS + 61);
      expect(Number(s.retryAfter)).toBeGreaterThanOrEqual(55);
      expect(Number(s.retryAfter)).toBeLessThanOrEqual(60);
    }
  });

  it("the sliding log admits the same requests across time: slots free as their entries leave the window", async () => {
    await client.flushall();
    const peer = await app((a) => a.use(ratelimit({ driver: "redis", db: client, duration: 2000, max: 3, id: () => "client" })));
    const ours = await app((a) =>
      a.use(floodgate({ policy: slidingLog({ limit: 3, window: "2s" }), store: redisStore({ client }), key: () => "client" }))
    );
    const run = async (s: Served) => {
      const started = Date.now();
      const out = await statuses(3, `${s.base}/`);
      const burstEnded = Date.now();
      await sleep(started + 1000 - Date.now());
      out.push(...await statuses(1, `${s.base}/`)); // 1 s after the first: all 3 still in the window
      await sleep(burstEnded + 2200 - Date.now());
      out.push(...await statuses(4, `${s.base}/`)); // 2.2 s after the last: all 3 have left
      return out;
    };
    const [a, b] = await Promise.all([run(peer), run(ours)]);
    expect(a).toEqual([200, 200, 200, 429, 200, 200, 200, 429]);
    expect(b).toEqual(a);
  });

  it("a Redis that is down: koa-ratelimit's error becomes a 500; Floodgate falls back to a local limiter", async () => {
    const down = await startRedis();
    const offline = new Redis(down.port, down.host, { enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => null });
    try {
      if (offline.status !== "ready") await new Promise((resolve) => offline.once("ready", resolve));
      const peer = await app((a) => before(a, offline));
      const ours = await app((a) => after(a, offline));
      down.kill("SIGKILL");
      await down.exited();
      await settled(() => expect(offline.status).not.toBe("ready"));
      expect((await Promise.all([send(peer), send(peer)])).map((s) => s.status)).toEqual([500, 500]);
      const fallback: number[] = [];
      for (let i = 0; i < 6; i++) fallback.push((await send(ours)).status);
      expect(fallback).toEqual([200, 200, 200, 200, 200, 429]);
    } finally {
      offline.disconnect();
      await down.stop();
    }
  });
});

describe("koa-ratelimit (memory driver): a window from the first hit, against Floodgate's aligned fixedWindow", () => {
  it("the aligned window turns over first; koa-ratelimit's X-RateLimit-Reset carries fractions of a second", async () => {
    // 2 s windows: the first hit 1 s into an aligned one, checked again 1.2 s later.
    await waitForOffset(2000, 1000);
    const started = Date.now();
    const peer = await app((a) => a.use(ratelimit({ driver: "memory", db: new Map(), duration: 2000, max: 3, id: () => "client" })));
    const ours = await app((a) => a.use(floodgate({ policy: fixedWindow({ limit: 3, window: "2s" }), key: () => "client" })));
    const p = await statuses(4, `${peer.base}/`);
    const o = await statuses(4, `${ours.base}/`);
    expect(p).toEqual([200, 200, 200, 429]);
    expect(o).toEqual(p);
    const reset = (await fetch(`${peer.base}/`)).headers.get("x-ratelimit-reset")!;
    expect(reset).toMatch(/^\d+\.\d+$/);
    await sleep(started + 1200 - Date.now());
    expect(await statuses(1, `${peer.base}/`)).toEqual([429]); // its window: first hit + 2 s
    expect(await statuses(1, `${ours.base}/`)).toEqual([200]); // a new aligned window
  });
});
