// @upstash/ratelimit and Floodgate side by side on the same traces, both through a real
// @upstash/redis client and the repository's Upstash-compatible HTTP bridge over a private
// redis-server: the guide's fetch-handler example on the real clock, then the documented
// differences on one faked Date (Floodgate's store on `clock: "local"`, the time both then read).
import { createRateLimiter, fixedWindow, slidingWindow, tokenBucket, upstashStore } from "@floodgate/core";
import { Ratelimit } from "@upstash/ratelimit";
import { Redis } from "@upstash/redis";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { freePort, type RedisInstance, startRedis } from "../support/redis-server.ts";
import { startUpstashBridge, type UpstashBridge } from "@floodgate/upstash-local";
import { limited as after } from "./examples/upstash-ratelimit-after.ts";
import { limited as before } from "./examples/upstash-ratelimit-before.ts";
import { ALIGNED, clearOfBoundary, fakeDate } from "./support.ts";

/**
 * @upstash/ratelimit 2.2 opens every script with `#!lua flags=allow-key-locking`, a flag only
 * Upstash's own servers know: vanilla Redis refuses the script. The flag changes nothing in what
 * the script computes, so this client passes the scripts to Redis without it (the library's
 * EVALSHA of the flagged text then misses, and it falls back to this EVAL, as it is written to).
 */
function acceptedByVanillaRedis(redis: Redis): Redis {
  const strip = (script: string): string => script.replace(/^#!lua flags=allow-key-locking\n/, "");
  return new Proxy(redis, {
    get(target, property, receiver) {
      if (property === "eval") return (script: string, keys: string[], args: unknown[]) => target.eval(strip(script), keys, args);
      return Reflect.get(target, property, receiver);
    },
  });
}

const app = async (): Promise<Response> => Response.json({ items: [] });
const request = (ip = "203.0.113.7") => new Request("https://api.example/items", { headers: { "x-real-ip": ip } });

let redis: RedisInstance;
let bridge: UpstashBridge;
let client: Redis;
let peerClient: Redis;
beforeAll(async () => {
  redis = await startRedis();
  bridge = await startUpstashBridge({ redis: { host: redis.host, port: redis.port } });
  client = new Redis({ url: bridge.url, token: bridge.token, enableTelemetry: false });
  peerClient = acceptedByVanillaRedis(client);
});
afterAll(async () => {
  await bridge?.stop();
  await redis?.stop();
});
beforeEach(async () => {
  await client.flushall();
});

describe("@upstash/ratelimit → withRateLimit + upstashStore (the guide's example)", () => {
  it("two instances admit the same 10 of 13; the same remaining counts; Reset in ms vs s for the same instant", async () => {
    const runs: { statuses: number[]; remaining: string[]; reset: string[]; startedMs: number }[] = [];
    for (const make of [before, after]) {
      const instances = [make(app, make === before ? peerClient : client), make(app, make === before ? peerClient : client)];
      await clearOfBoundary(10_000, 5000); // both count in 10 s windows aligned to the clock
      const run = { statuses: [] as number[], remaining: [] as string[], reset: [] as string[], startedMs: Date.now() };
      for (let i = 0; i < 13; i++) {
        const response = await instances[i % 2]!(request());
        run.statuses.push(response.status);
        run.remaining.push(response.headers.get("x-ratelimit-remaining")!);
        run.reset.push(response.headers.get("x-ratelimit-reset")!);
      }
      runs.push(run);
    }
    const [peer, ours] = runs as [typeof runs[0], typeof runs[0]];
    expect(peer.statuses).toEqual([...Array(10).fill(200), 429, 429, 429]);
    expect(ours.statuses).toEqual(peer.statuses);
    expect(ours.remaining.slice(0, 10)).toEqual(peer.remaining.slice(0, 10));
    expect(ours.remaining.slice(0, 10)).toEqual(["9", "8", "7", "6", "5", "4", "3", "2", "1", "0"]);
    // The same window end: @upstash/ratelimit's `reset` is epoch ms, Floodgate's header epoch s.
    const windowEnd = (t: number) => t - (t % 10_000) + 10_000;
    expect(Number(peer.reset[0])).toBe(windowEnd(peer.startedMs));
    expect(Number(ours.reset[0])).toBe(windowEnd(ours.startedMs) / 1000);
  });

  it("Redis unreachable: @upstash/ratelimit's error escapes the handler; Floodgate falls back to a local limiter", async () => {
    const nowhere = new Redis({ url: `http://127.0.0.1:${await freePort()}`, token: "unused", retry: false, enableTelemetry: false });
    const peer = before(app, nowhere);
    const ours = after(app, nowhere);
    await clearOfBoundary(10_000, 5000);
    await expect(peer(request())).rejects.toThrow();
    const statuses: number[] = [];
    for (let i = 0; i < 11; i++) statuses.push((await ours(request())).status);
    expect(statuses).toEqual([...Array(10).fill(200), 429]);
  });
});

describe("documented differences (one faked Date)", () => {
  let clock: ReturnType<typeof fakeDate> | undefined;
  afterEach(() => clock?.restore());

  /** Floodgate on the same local time @upstash/ratelimit reads. */
  const floodgate = (policy: Parameters<typeof createRateLimiter>[0]["policy"]) =>
    createRateLimiter({ policy, store: upstashStore({ redis: client, clock: "local" }) });

  it("fixed windows: aligned in both, so the same answers across window boundaries", async () => {
    clock = fakeDate(ALIGNED + 7_000);
    const peer = new Ratelimit({ redis: peerClient, limiter: Ratelimit.fixedWindow(5, "10 s") });
    const ours = floodgate(fixedWindow({ limit: 5, window: "10s" }));
    const p: boolean[] = [];
    const o: boolean[] = [];
    for (const [advanceMs, n] of [[0, 4], [2000, 3], [1500, 4], [9000, 6], [6000, 2]] as const) {
      clock.advance(advanceMs);
      for (let i = 0; i < n; i++) {
        p.push((await peer.limit("u")).success);
        o.push((await ours.limit("u")).allowed);
      }
    }
    expect(o).toEqual(p);
    expect(o.filter(Boolean).length).toBe(4 + 1 + 4 + 1 + 2);
  });

  it("a denied limit(id, { rate }) still adds its rate; a denied Floodgate cost adds nothing", async () => {
    clock = fakeDate(ALIGNED + 1000);
    const peer = new Ratelimit({ redis: peerClient, limiter: Ratelimit.fixedWindow(10, "10 s"), ephemeralCache: false });
    const ours = floodgate(fixedWindow({ limit: 10, window: "10s" }));
    const p: boolean[] = [];
    const o: boolean[] = [];
    for (const cost of [4, 4, 3, 1, 1]) {
      p.push((await peer.limit("u", { rate: cost })).success);
      o.push((await ours.limit("u", { cost })).allowed);
    }
    expect(p).toEqual([true, true, false, false, false]); // the 3 was counted: 11 of 10
    expect(o).toEqual([true, true, false, true, true]);
  });

  it("sliding windows: @upstash/ratelimit rounds the previous window's weight down, admitting one more", async () => {
    clock = fakeDate(ALIGNED + 1000);
    const peer = new Ratelimit({ redis: peerClient, limiter: Ratelimit.slidingWindow(10, "10 s"), ephemeralCache: false });
    const ours = floodgate(slidingWindow({ limit: 10, window: "10s" }));
    for (let i = 0; i < 10; i++) {
      expect((await peer.limit("u")).success).toBe(true);
      expect((await ours.limit("u")).allowed).toBe(true);
    }
    // 5.5 s into the next window, 45 % of the previous one still counts: 4.5 requests.
    clock.advance(9_000 + 5_500);
    let p = 0;
    let o = 0;
    for (let i = 0; i < 10; i++) {
      if ((await peer.limit("u")).success) p++;
      if ((await ours.limit("u")).allowed) o++;
    }
    expect(p).toBe(6); // floor(4.5) = 4 counted
    expect(o).toBe(5); // 4.5 counted: 5 + 4.5 <= 10
  });

  it("token buckets: @upstash/ratelimit refills refillRate at once every interval; Floodgate's refills continuously", async () => {
    clock = fakeDate(ALIGNED + 1000);
    // 10 at most; 5 tokens per 10 s.
    const peer = new Ratelimit({ redis: peerClient, limiter: Ratelimit.tokenBucket(5, "10 s", 10), ephemeralCache: false });
    const ours = floodgate(tokenBucket({ capacity: 10, refillRate: 0.5 }));
    for (let i = 0; i < 10; i++) {
      expect((await peer.limit("u")).success).toBe(true);
      expect((await ours.limit("u")).allowed).toBe(true);
    }
    clock.advance(2000);
    expect((await peer.limit("u")).success).toBe(false); // nothing until the interval has passed
    expect((await ours.limit("u")).allowed).toBe(true); // one token every 2 s
    clock.advance(8000);
    let p = 0;
    for (let i = 0; i < 6; i++) if ((await peer.limit("u")).success) p++;
    expect(p).toBe(5);
  });
});
