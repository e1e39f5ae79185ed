// rate-limiter-flexible and Floodgate side by side: the guide's Express middleware on a real
// Redis (two instances sharing it), and the engine-level budget on the memory stores with one
// faked Date both read.
import { createRateLimiter, fixedWindow, slidingLog } from "@floodgate/core";
import express from "express";
import { Redis } from "ioredis";
import { RateLimiterMemory } from "rate-limiter-flexible";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type RedisInstance, startRedis } from "../support/redis-server.ts";
import { limitApi as after } from "./examples/rate-limiter-flexible-after.ts";
import { limitApi as before } from "./examples/rate-limiter-flexible-before.ts";
import { createBudget as budgetAfter } from "./examples/rate-limiter-flexible-engine-after.ts";
import { createBudget as budgetBefore } from "./examples/rate-limiter-flexible-engine-before.ts";
import { ALIGNED, clearOfBoundary, fakeDate, serve, type Served, settled, statuses } from "./support.ts";

const servers: Served[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await s.close();
});

async function app(install: (app: express.Express) => void): Promise<Served> {
  const a = express();
  install(a);
  a.get("/api/items", (_req, res) => {
    res.json({ items: [] });
  });
  const served = await serve(a);
  servers.push(served);
  return served;
}

describe("a hand-written Express middleware over RateLimiterRedis → @floodgate/express (the guide's example)", () => {
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

  it("two instances sharing Redis admit the same 5 of 8, with the same remaining counts and 429 body", async () => {
    const runs: { statuses: number[]; remaining: (string | null)[]; body: unknown; retryAfter: number }[] = [];
    for (const install of [before, after]) {
      const instances = [await app((a) => install(a, client)), await app((a) => install(a, client))];
      await clearOfBoundary(60_000, 5000); // Floodgate's minute is aligned to the clock
      const list: number[] = [];
      const remaining: (string | null)[] = [];
      let last: Response | undefined;
      for (let i = 0; i < 8; i++) {
        last = await fetch(`${instances[i % 2]!.base}/api/items`);
        list.push(last.status);
        remaining.push(last.headers.get("x-ratelimit-remaining"));
        if (i < 7) await last.arrayBuffer();
      }
      runs.push({
        statuses: list,
        remaining: remaining.slice(0, 5),
        body: await last!.json(),
        retryAfter: Number(last!.headers.get("retry-after")),
      });
    }
    const [peer, ours] = runs as [typeof runs[0], typeof runs[0]];
    expect(peer.statuses).toEqual([200, 200, 200, 200, 200, 429, 429, 429]);
    expect(ours.statuses).toEqual(peer.statuses);
    expect(ours.remaining).toEqual(peer.remaining);
    expect(ours.remaining).toEqual(["4", "3", "2", "1", "0"]);
    expect(ours.body).toEqual(peer.body);
    for (const r of [peer, ours]) {
      expect(r.retryAfter).toBeGreaterThanOrEqual(1);
      expect(r.retryAfter).toBeLessThanOrEqual(60);
    }
  });

  it("a Redis that is down: the hand-written middleware passes the error on (500); Floodgate falls back to a local limiter", async () => {
    const down = await startRedis();
    const offline = new Redis(down.port, down.host, { enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => null });
    try {
      if (offline.status !== "ready") await new Promise((resolve) => offline.once("ready", resolve));
      const peer = await app((a) => before(a, offline));
      const ours = await app((a) => after(a, offline));
      down.kill("SIGKILL");
      await down.exited();
      await settled(() => expect(offline.status).not.toBe("ready"));
      expect(await statuses(2, `${peer.base}/api/items`)).toEqual([500, 500]);
      await clearOfBoundary(60_000, 5000); // the fallback counts in aligned minutes too
      expect(await statuses(6, `${ours.base}/api/items`)).toEqual([200, 200, 200, 200, 200, 429]);
    } finally {
      offline.disconnect();
      await down.stop();
    }
  });
});

describe("the engine: consume() → limit() (one faked Date for both)", () => {
  let clock: ReturnType<typeof fakeDate> | undefined;
  afterEach(() => clock?.restore());

  it("units of 1 inside one window: the same answers", async () => {
    clock = fakeDate(ALIGNED + 1000);
    const peer = budgetBefore();
    const ours = budgetAfter();
    const trace = Array<number>(12).fill(1);
    const p: boolean[] = [];
    const o: boolean[] = [];
    for (const units of trace) {
      p.push((await peer("u", units)).ok);
      o.push((await ours("u", units)).ok);
    }
    expect(p).toEqual([...Array(10).fill(true), false, false]);
    expect(o).toEqual(p);
  });

  it("a refused consume() still takes its points; a denied limit() charges nothing", async () => {
    clock = fakeDate(ALIGNED + 1000);
    const peer = budgetBefore();
    const ours = budgetAfter();
    const trace = [4, 4, 3, 1, 1];
    const p: boolean[] = [];
    const o: boolean[] = [];
    for (const units of trace) {
      p.push((await peer("u", units)).ok);
      o.push((await ours("u", units)).ok);
    }
    expect(p).toEqual([true, true, false, false, false]); // 4 + 4 + 3 = 11 points taken: full
    expect(o).toEqual([true, true, false, true, true]); // the 3 was refused whole: 2 units were left
  });

  it("the window starts at the first consume() vs windows aligned to the clock; msBeforeNext vs retryAfterMs", async () => {
    clock = fakeDate(ALIGNED + 30_000);
    const peer = budgetBefore();
    const ours = budgetAfter();
    for (let i = 0; i < 10; i++) {
      await peer("u", 1);
      await ours("u", 1);
    }
    expect(await peer("u", 1)).toEqual({ ok: false, waitMs: 60_000 }); // until first hit + 60 s
    expect(await ours("u", 1)).toEqual({ ok: false, waitMs: 30_000 }); // until the minute turns
    clock.advance(30_000);
    expect((await peer("u", 1)).ok).toBe(false);
    expect((await ours("u", 1)).ok).toBe(true);
  });

  it("blockDuration has no equivalent: a second, longer policy checked in the same step keeps an abuser out", async () => {
    clock = fakeDate(ALIGNED + 1000);
    // rate-limiter-flexible: over 10 in a minute blocks for 10 minutes.
    const peer = new RateLimiterMemory({ points: 10, duration: 60, blockDuration: 600 });
    // Floodgate: 10 a minute AND 20 per 10 minutes, both charged or neither.
    const ours = createRateLimiter({ policy: [fixedWindow({ limit: 10, window: "1m" }), slidingLog({ limit: 20, window: "10m" })] });
    const peerOk = async () => peer.consume("u").then(() => true, () => false);
    const oursOk = async () => (await ours.limit("u")).allowed;
    const minute = async (ok: () => Promise<boolean>) => {
      let n = 0;
      for (let i = 0; i < 15; i++) if (await ok()) n++;
      return n;
    };
    expect([await minute(peerOk), await minute(oursOk)]).toEqual([10, 10]);
    clock.advance(60_000);
    expect([await minute(peerOk), await minute(oursOk)]).toEqual([0, 10]); // the peer blocks; ours has 10 left of 20
    clock.advance(60_000);
    expect([await minute(peerOk), await minute(oursOk)]).toEqual([0, 0]);
  });
});
