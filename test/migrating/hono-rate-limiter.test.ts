// hono-rate-limiter and Floodgate side by side on the same request traces, on Hono served by
// @hono/node-server (real sockets, so getConnInfo gives the real peer address).
import { fixedWindow, upstashStore } from "@floodgate/core";
import { rateLimit as floodgate } from "@floodgate/hono";
import { getRequestListener } from "@hono/node-server";
import { Hono } from "hono";
import { rateLimiter, RedisStore } from "hono-rate-limiter";
import { Redis as UpstashRedis } from "@upstash/redis";
import { afterEach, describe, expect, it } from "vitest";
import { freePort } from "../support/redis-server.ts";
import { limitApi as after } from "./examples/hono-rate-limiter-after.ts";
import { limitApi as before } from "./examples/hono-rate-limiter-before.ts";
import { ALIGNED, clearOfBoundary, fakeDate, serve, type Served, sleep, statuses } from "./support.ts";

const servers: Served[] = [];
let clock: ReturnType<typeof fakeDate> | undefined;
afterEach(async () => {
  clock?.restore();
  clock = undefined;
  for (const s of servers.splice(0)) await s.close();
});

async function app(install: (app: Hono) => void): Promise<Served> {
  const a = new Hono();
  install(a);
  a.get("/api/items", (c) => c.json({ items: [] }));
  a.post("/login", (c) => c.body(null, c.req.query("password") === "right" ? 200 : 401));
  const served = await serve(getRequestListener(a.fetch));
  servers.push(served);
  return served;
}

/** A draft-7 `RateLimit: limit=5, remaining=4, reset=60` header as numbers. */
const draft7 = (value: string | null): Record<string, number> =>
  Object.fromEntries((value ?? "").split(",").map((part) => part.trim().split("=")).map(([k, v]) => [k, Number(v)]));

describe("hono-rate-limiter → Floodgate (the guide's example)", () => {
  it("admits the same 5 of 7 requests with the same body and the same draft-7 quota", async () => {
    const b = await app(before);
    const f = await app(after);
    await clearOfBoundary(60_000, 5000); // Floodgate's minute is aligned to the clock
    const runs = await Promise.all([b, f].map(async (s) => {
      const first = await fetch(`${s.base}/api/items`);
      const rest = await statuses(5, `${s.base}/api/items`);
      const last = await fetch(`${s.base}/api/items`);
      return { first, list: [first.status, ...rest, last.status], last };
    }));
    const [peer, ours] = runs as [typeof runs[0], typeof runs[0]];
    expect(peer.list).toEqual([200, 200, 200, 200, 200, 429, 429]);
    expect(ours.list).toEqual(peer.list);
    expect(await ours.last.json()).toEqual(await peer.last.json());
    expect(ours.first.headers.get("ratelimit-policy")).toBe(peer.first.headers.get("ratelimit-policy"));
    expect(ours.first.headers.get("ratelimit-policy")).toBe("5;w=60");
    expect(draft7(ours.first.headers.get("ratelimit"))).toMatchObject({ limit: 5, remaining: 4 });
    expect(draft7(peer.first.headers.get("ratelimit"))).toMatchObject({ limit: 5, remaining: 4 });
    // Both answer a 429 with Retry-After in seconds.
    for (const r of [peer.last, ours.last]) expect(Number(r.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
  });
});

describe("documented differences", () => {
  it("a window from the first hit vs windows aligned to the clock", async () => {
    clock = fakeDate(ALIGNED + 45_000); // 45 s into a minute
    const peer = await app((a) => a.use("/api/*", rateLimiter({ windowMs: 60_000, limit: 3, keyGenerator: () => "client" })));
    const ours = await app((a) => a.use("/api/*", floodgate({ policy: fixedWindow({ limit: 3, window: "1m" }), key: () => "client" })));
    for (const s of [peer, ours]) expect(await statuses(4, `${s.base}/api/items`)).toEqual([200, 200, 200, 429]);
    // 16 s later the aligned minute has turned; the peer's window ends 60 s after the first hit.
    clock.advance(16_000);
    expect(await statuses(1, `${peer.base}/api/items`)).toEqual([429]);
    expect(await statuses(1, `${ours.base}/api/items`)).toEqual([200]);
    // The peer's `reset` is seconds from now; so is Floodgate's in draft-6/7 (and in legacy with "delta").
    clock.advance(43_000);
    const r = await fetch(`${peer.base}/api/items`);
    expect(r.headers.get("ratelimit-reset")).toBe("1");
    expect(r.headers.get("x-ratelimit-reset")).toBeNull(); // no legacy headers at all
  });

  it("keys: a raw-address keyGenerator counts each IPv6 address apart; Floodgate groups the /64", async () => {
    clock = fakeDate(ALIGNED + 1000);
    // The common keyGenerator reads the forwarding header; Floodgate's trustProxy reads it only
    // from the configured proxies (here: one hop, the test itself on 127.0.0.1).
    const peer = await app((a) =>
      a.use("/api/*", rateLimiter({ windowMs: 60_000, limit: 5, keyGenerator: (c) => c.req.header("x-forwarded-for") ?? "" }))
    );
    const ours = await app((a) => a.use("/api/*", floodgate({ policy: fixedWindow({ limit: 5, window: "1m" }), trustProxy: 1 })));
    const run = async (s: Served) => {
      const out: number[] = [];
      for (let i = 1; i <= 10; i++) {
        out.push(...await statuses(1, `${s.base}/api/items`, { headers: { "x-forwarded-for": `2001:db8:1:2::${i.toString(16)}` } }));
      }
      return out;
    };
    expect(await run(peer)).toEqual(Array(10).fill(200));
    expect(await run(ours)).toEqual([200, 200, 200, 200, 200, 429, 429, 429, 429, 429]);
  });

  it("skipSuccessfulRequests: both count only responses >= 400", async () => {
    clock = fakeDate(ALIGNED + 1000);
    const peer = await app((a) =>
      a.use("/login", rateLimiter({ windowMs: 60_000, limit: 3, skipSuccessfulRequests: true, keyGenerator: () => "client" }))
    );
    const ours = await app((a) =>
      a.use("/login", floodgate({ policy: fixedWindow({ limit: 3, window: "1m" }), skipSuccessfulRequests: true }))
    );
    const attempts = ["right", "right", "right", "right", "wrong", "wrong", "wrong", "wrong", "right"];
    const run = async (s: Served) => {
      const out: number[] = [];
      for (const password of attempts) {
        out.push(...await statuses(1, `${s.base}/login?password=${password}`, { method: "POST" }));
        await sleep(15); // Floodgate on Node refunds when the response has closed
      }
      return out;
    };
    const expected = [200, 200, 200, 200, 401, 401, 401, 429, 429];
    expect(await run(peer)).toEqual(expected);
    expect(await run(ours)).toEqual(expected);
  });

  it("Redis unreachable: hono-rate-limiter's error reaches Hono (500); Floodgate's fallback limiter answers", async () => {
    // One @upstash/redis client for both stores, pointed at a loopback port nothing listens on.
    const redis = new UpstashRedis({ url: `http://127.0.0.1:${await freePort()}`, token: "unused", retry: false, enableTelemetry: false });
    const peer = await app((a) =>
      a.use("/api/*", rateLimiter({ windowMs: 60_000, limit: 2, keyGenerator: () => "client", store: new RedisStore({ client: redis }) }))
    );
    const ours = await app((a) =>
      a.use("/api/*", floodgate({ policy: fixedWindow({ limit: 2, window: "1m" }), store: upstashStore({ redis }), key: () => "client" }))
    );
    await clearOfBoundary(60_000, 3000);
    expect(await statuses(3, `${peer.base}/api/items`)).toEqual([500, 500, 500]);
    expect(await statuses(3, `${ours.base}/api/items`)).toEqual([200, 200, 429]);
  });
});
