// express-rate-limit (+ rate-limit-redis) and Floodgate side by side on the same request traces,
// on Express 5 and Express 4: the guide's before/after examples on a real Redis, then the
// documented differences on the memory stores with one faked Date both read.
import { fixedWindow, slidingLog } from "@floodgate/core";
import { rateLimit as floodgate } from "@floodgate/express";
import express5, { type Express } from "express";
import { rateLimit } from "express-rate-limit";
import express4 from "express4";
import { Redis } from "ioredis";
import { parseList } from "structured-headers";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type RedisInstance, startRedis } from "../support/redis-server.ts";
import { limitApi as after } from "./examples/express-rate-limit-after.ts";
import { limitApi as before } from "./examples/express-rate-limit-before.ts";
import { admitted, ALIGNED, clearOfBoundary, fakeDate, serve, type Served, settled, sleep, statuses } from "./support.ts";

const MAJORS = [["Express 5", express5], ["Express 4", express4]] as const;
const CLIENT = { "x-forwarded-for": "203.0.113.7" };

const servers: Served[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await s.close();
});

/** An app with the rate limit installed by `install`, and a route behind it; served on a free port. */
async function app(createApp: () => Express, install: (app: Express) => void): Promise<Served> {
  const a = createApp();
  install(a);
  a.get("/api/items", (_req, res) => {
    res.json({ items: [] });
  });
  const served = await serve(a);
  servers.push(served);
  return served;
}

/** A draft-8/draft-11 list header's first member as its parameters, e.g. { q: 5, w: 60 }. */
function firstMember(value: string | null): Record<string, unknown> {
  const [item] = parseList(value ?? "");
  return Object.fromEntries(item![1]);
}

describe("express-rate-limit with rate-limit-redis → Floodgate on Redis (the guide's example)", () => {
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

  for (const [major, createApp] of MAJORS) {
    it(`${major}: two instances sharing Redis admit the same 5 of 8 requests; same body, quota and window`, async () => {
      await client.flushall();
      const results: Record<string, { statuses: number[]; last: Response; first: Response }> = {};
      for (const [name, install] of [["before", before], ["after", after]] as const) {
        const instances = [await app(createApp, (a) => install(a, client)), await app(createApp, (a) => install(a, client))];
        // Floodgate's window is aligned to the minute: keep the trace inside one.
        await clearOfBoundary(60_000, 5000);
        const first = await fetch(`${instances[0]!.base}/api/items`, { headers: CLIENT });
        await first.arrayBuffer();
        const list = [first.status];
        for (let i = 1; i < 7; i++) list.push(...await statuses(1, `${instances[i % 2]!.base}/api/items`, { headers: CLIENT }));
        const last = await fetch(`${instances[1]!.base}/api/items`, { headers: CLIENT });
        list.push(last.status);
        results[name] = { statuses: list, last, first };
      }
      const { before: b, after: f } = results as Record<"before" | "after", (typeof results)[string]>;
      expect(b.statuses).toEqual([200, 200, 200, 200, 200, 429, 429, 429]);
      expect(f.statuses).toEqual(b.statuses);
      expect(await f.last.json()).toEqual(await b.last.json());

      // Quota and window read the same through the draft-8 and draft-11 lists.
      expect(firstMember(f.first.headers.get("ratelimit-policy"))).toMatchObject({ q: 5, w: 60 });
      expect(firstMember(b.first.headers.get("ratelimit-policy"))).toMatchObject({ q: 5, w: 60 });
      expect(firstMember(f.first.headers.get("ratelimit"))).toMatchObject({ r: 4 });
      expect(firstMember(b.first.headers.get("ratelimit"))).toMatchObject({ r: 4 });
      // X-RateLimit-Reset is epoch seconds in both; Retry-After is seconds in both.
      const nowS = Date.now() / 1000;
      for (const r of [b.first, f.first]) {
        const reset = Number(r.headers.get("x-ratelimit-reset"));
        expect(reset).toBeGreaterThan(nowS - 1);
        expect(reset).toBeLessThanOrEqual(nowS + 61);
      }
      for (const r of [b.last, f.last]) expect(Number(r.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
      for (const r of [b.last, f.last]) expect(Number(r.headers.get("retry-after"))).toBeLessThanOrEqual(60);
    });
  }

  it("a Redis that is down: express-rate-limit fails the request (500), Floodgate falls back to a local limiter", async () => {
    const down = await startRedis();
    const offline = new Redis(down.port, down.host, { enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => null });
    try {
      if (offline.status !== "ready") await new Promise((resolve) => offline.once("ready", resolve));
      const b = await app(express5, (a) => before(a, offline));
      const f = await app(express5, (a) => after(a, offline));
      // Both reach Redis while it is up (rate-limit-redis loads its scripts first).
      expect(await statuses(1, `${b.base}/api/items`, { headers: CLIENT })).toEqual([200]);
      expect(await statuses(1, `${f.base}/api/items`, { headers: CLIENT })).toEqual([200]);
      down.kill("SIGKILL");
      await down.exited();
      await settled(() => expect(offline.status).not.toBe("ready"));
      expect(await statuses(3, `${b.base}/api/items`, { headers: CLIENT })).toEqual([500, 500, 500]);
      await clearOfBoundary(60_000, 5000); // the fallback counts in aligned minutes too
      // The fallback limiter counts from zero with the same policy: 5 more, then 429.
      expect(await statuses(7, `${f.base}/api/items`, { headers: CLIENT })).toEqual([200, 200, 200, 200, 200, 429, 429]);
    } finally {
      offline.disconnect();
      await down.stop();
    }
  });
});

describe("window semantics on the memory stores (one faked Date for both)", () => {
  let clock: ReturnType<typeof fakeDate> | undefined;
  afterEach(() => clock?.restore());

  for (const [major, createApp] of MAJORS) {
    it(`${major}: a window from the first hit vs windows aligned to the clock; slidingLog as the strict alternative`, async () => {
      clock = fakeDate(ALIGNED + 30_000); // first hit 30 s into a minute
      const peer = await app(createApp, (a) => a.use("/api/", rateLimit({ windowMs: 60_000, limit: 5 })));
      const fixed = await app(createApp, (a) => a.use("/api/", floodgate({ policy: fixedWindow({ limit: 5, window: "1m" }) })));
      const log = await app(createApp, (a) => a.use("/api/", floodgate({ policy: slidingLog({ limit: 5, window: "1m" }) })));
      const all = [peer, fixed, log];
      const trace = async (n: number) => Promise.all(all.map((s) => statuses(n, `${s.base}/api/items`)));

      const first = await trace(6);
      for (const list of first) expect(list).toEqual([200, 200, 200, 200, 200, 429]);

      // 31 s later: the aligned minute has turned, the peer's window (first hit + 60 s) has not.
      clock.advance(31_000);
      const [p1, f1, l1] = await trace(1);
      expect(p1).toEqual([429]);
      expect(f1).toEqual([200]);
      expect(l1).toEqual([429]); // 5 admitted in the last 60 s

      // At first hit + 60 s: the peer starts over, and the log's 5 entries have left the window.
      clock.advance(29_000);
      const [p2, , l2] = await trace(5);
      expect(admitted(p2!)).toBe(5);
      expect(admitted(l2!)).toBe(5);
    });
  }

  it("both fixed windows admit a double burst across their own boundary; slidingLog admits none", async () => {
    clock = fakeDate(ALIGNED);
    const peer = await app(express5, (a) => a.use("/api/", rateLimit({ windowMs: 60_000, limit: 5 })));
    const fixed = await app(express5, (a) => a.use("/api/", floodgate({ policy: fixedWindow({ limit: 5, window: "1m" }) })));
    const log = await app(express5, (a) => a.use("/api/", floodgate({ policy: slidingLog({ limit: 5, window: "1m" }) })));
    const burst = async () => Promise.all([peer, fixed, log].map(async (s) => admitted(await statuses(5, `${s.base}/api/items`))));
    // The first request at the start of an aligned minute, so both windows run from +0 s to
    // +60 s; then 4 more at +59 s...
    await Promise.all([peer, fixed, log].map((s) => statuses(1, `${s.base}/api/items`)));
    clock.advance(59_000);
    await Promise.all([peer, fixed, log].map((s) => statuses(4, `${s.base}/api/items`)));
    // ...and 5 more at +61 s: both fixed windows have started over, the log still holds 4.
    clock.advance(2000);
    expect(await burst()).toEqual([5, 5, 1]);
  });

  it('X-RateLimit-Reset: epoch seconds in both, but of the first-hit window vs the aligned one; legacyReset: "delta" for seconds from now', async () => {
    clock = fakeDate(ALIGNED + 30_000);
    const peer = await app(express5, (a) => a.use("/api/", rateLimit({ windowMs: 60_000, limit: 5 })));
    const epoch = await app(express5, (a) => a.use("/api/", floodgate({ policy: fixedWindow({ limit: 5, window: "1m" }) })));
    const delta = await app(
      express5,
      (a) => a.use("/api/", floodgate({ policy: fixedWindow({ limit: 5, window: "1m" }), legacyReset: "delta" })),
    );
    const reset = async (s: Served) => (await fetch(`${s.base}/api/items`)).headers.get("x-ratelimit-reset");
    expect(await reset(peer)).toBe(`${ALIGNED / 1000 + 90}`);
    expect(await reset(epoch)).toBe(`${ALIGNED / 1000 + 60}`);
    expect(await reset(delta)).toBe("30");
    // Defaults: the peer sends only the legacy headers, Floodgate legacy + draft-11.
    const p = await fetch(`${peer.base}/api/items`);
    const f = await fetch(`${epoch.base}/api/items`);
    expect(p.headers.get("ratelimit")).toBeNull();
    expect(f.headers.get("ratelimit")).toBe('"5-per-1m";r=3;t=30');
    expect(p.headers.get("x-ratelimit-remaining")).toBe("3");
    expect(f.headers.get("x-ratelimit-remaining")).toBe("3");
  });

  it("IPv6: express-rate-limit groups by /56, Floodgate by /64 unless ipv6Subnet: 56", async () => {
    clock = fakeDate(ALIGNED + 1000);
    const trusting = (install: (a: Express) => void) => (a: Express) => {
      a.set("trust proxy", 1);
      install(a);
    };
    const peer = await app(express5, trusting((a) => a.use("/api/", rateLimit({ windowMs: 60_000, limit: 5 }))));
    const by64 = await app(express5, trusting((a) => a.use("/api/", floodgate({ policy: fixedWindow({ limit: 5, window: "1m" }) }))));
    const by56 = await app(
      express5,
      trusting((a) => a.use("/api/", floodgate({ policy: fixedWindow({ limit: 5, window: "1m" }), ipv6Subnet: 56 }))),
    );
    // Two /64 networks inside one /56.
    const a = { "x-forwarded-for": "2001:db8:1:100::1" };
    const b = { "x-forwarded-for": "2001:db8:1:1ff::1" };
    const run = async (
      s: Served,
    ) => [...await statuses(5, `${s.base}/api/items`, { headers: a }), ...await statuses(5, `${s.base}/api/items`, { headers: b })];
    const shared = [200, 200, 200, 200, 200, 429, 429, 429, 429, 429];
    expect(await run(peer)).toEqual(shared);
    expect(await run(by56)).toEqual(shared);
    expect(await run(by64)).toEqual(Array(10).fill(200));
  });

  it("skipSuccessfulRequests: both count only responses >= 400 (a login that counts failures)", async () => {
    clock = fakeDate(ALIGNED + 1000);
    const login = (install: (a: Express) => void) => {
      const a = express5();
      install(a);
      a.post("/login", (req, res) => {
        res.status(req.query.password === "right" ? 200 : 401).end();
      });
      return a;
    };
    const peerApp = await serve(login((a) => a.use(rateLimit({ windowMs: 60_000, limit: 3, skipSuccessfulRequests: true }))));
    const oursApp = await serve(
      login((a) => a.use(floodgate({ policy: fixedWindow({ limit: 3, window: "1m" }), skipSuccessfulRequests: true }))),
    );
    servers.push(peerApp, oursApp);
    const attempts = ["right", "right", "right", "right", "wrong", "wrong", "wrong", "wrong", "right"];
    const run = async (s: Served) => {
      const out: number[] = [];
      for (const password of attempts) {
        out.push(...await statuses(1, `${s.base}/login?password=${password}`, { method: "POST" }));
        await sleep(15); // both adjust the count once the response has finished
      }
      return out;
    };
    const expected = [200, 200, 200, 200, 401, 401, 401, 429, 429];
    expect(await run(peerApp)).toEqual(expected);
    expect(await run(oursApp)).toEqual(expected);
  });
});
