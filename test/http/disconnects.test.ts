// Clients that hang up, through every integration, on the memory store and on Redis (a real
// redis-server this file starts): a concurrency limit bounds the handlers running at once, a
// unit comes back when the later of the handler's end and the response's end has passed, and a
// request whose client left while the store decided is settled at once without running its handler.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import {
  concurrency,
  createRateLimiter,
  fixedWindow,
  type HttpRateLimitOptions,
  memoryStore,
  type Policy,
  type RateLimitHandle,
  type RateLimitStore,
  redisStore,
  withRateLimit,
} from "@floodgate/core";
import { rateLimit as expressRateLimit } from "@floodgate/express";
import { rateLimit as honoRateLimit } from "@floodgate/hono";
import { rateLimit as koaRateLimit } from "@floodgate/koa";
import { serve } from "@hono/node-server";
import express from "express";
import express4 from "express4";
import { Hono } from "hono";
import { Redis as IORedis } from "ioredis";
import Koa from "koa";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../support/eventually.ts";
import { type RedisInstance, startRedis } from "../support/redis-server.ts";

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Handlers running now and the most ever running at once, per key. */
class Running {
  readonly now = new Map<string, number>();
  readonly most = new Map<string, number>();
  runs = 0;
  async during(key: string, ms: number): Promise<void> {
    this.runs++;
    const n = (this.now.get(key) ?? 0) + 1;
    this.now.set(key, n);
    this.most.set(key, Math.max(this.most.get(key) ?? 0, n));
    try {
      await sleep(ms);
    } finally {
      this.now.set(key, this.now.get(key)! - 1);
    }
  }
  /** Resolves once no handler runs (after those still running past their client's hang-up). */
  async idle(): Promise<void> {
    const started = Date.now();
    await sleep(50);
    while ([...this.now.values()].some((n) => n > 0)) {
      if (Date.now() - started > 10_000) throw new Error("handlers still running after 10 s");
      await sleep(20);
    }
  }
  mostAtOnce(): number {
    return Math.max(0, ...this.most.values());
  }
}

/** The query every route reads: `?key=k3&ms=40`. */
const query = (url: string) => {
  const q = new URL(url, "http://localhost").searchParams;
  return { key: q.get("key") ?? "k", ms: Number(q.get("ms") ?? 0) };
};

interface App {
  /** Sends a request; with `dropAfter`, the client hangs up that many ms after sending it. Resolves once it is answered or dropped. */
  send(path: string, dropAfter?: number): Promise<void>;
  handle: RateLimitHandle;
  close(): Promise<void>;
}

interface Target {
  name: string;
  start(options: HttpRateLimitOptions<any>, running: Running): Promise<App>;
}

async function overHttp(server: Server, handle: RateLimitHandle): Promise<App> {
  if (!server.listening) await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    handle,
    async send(path, dropAfter) {
      const controller = new AbortController();
      const timer = dropAfter === undefined ? undefined : setTimeout(() => controller.abort(), dropAfter);
      try {
        const response = await fetch(base + path, { signal: controller.signal });
        await response.text();
      } catch {
        // dropped
      } finally {
        clearTimeout(timer);
      }
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** The key of a request, whichever framework's object `raw` is: the `key` query parameter. */
function keyOf(raw: any): string {
  const url: string = raw.originalUrl ?? raw.url ?? raw.req?.url ?? raw.raw?.url;
  return query(url).key;
}

const options = (o: HttpRateLimitOptions<any>) => ({ ...o, key: o.key ?? ((req: { raw: unknown }) => keyOf(req.raw)) });

const TARGETS: Target[] = [
  {
    name: "express",
    async start(o, running) {
      const app = express();
      const limit = expressRateLimit(options(o));
      app.use(limit, async (req, res) => {
        const { key, ms } = query(req.originalUrl);
        await running.during(key, ms);
        res.send("done");
      });
      return overHttp(createServer(app), limit);
    },
  },
  {
    name: "express 4",
    async start(o, running) {
      const app = express4();
      const limit = expressRateLimit(options(o));
      app.use(
        limit as never,
        (async (req: express.Request, res: express.Response) => {
          const { key, ms } = query(req.originalUrl);
          await running.during(key, ms);
          res.send("done");
        }) as never,
      );
      return overHttp(createServer(app), limit);
    },
  },
  {
    name: "koa",
    async start(o, running) {
      const app = new Koa();
      const limit = koaRateLimit(options(o));
      app.use(limit);
      app.use(async (ctx) => {
        const { key, ms } = query(ctx.originalUrl);
        await running.during(key, ms);
        ctx.body = "done";
      });
      return overHttp(createServer(app.callback()), limit);
    },
  },
  {
    name: "hono (node-server)",
    async start(o, running) {
      const app = new Hono();
      const limit = honoRateLimit(options(o));
      app.use(limit);
      app.get("*", async (c) => {
        const { key, ms } = query(c.req.url);
        await running.during(key, ms);
        return c.text("done");
      });
      const server = await new Promise<Server>((resolve) => {
        const s = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, () => resolve(s as Server));
      });
      return overHttp(server, limit);
    },
  },
  {
    // In process: a client that hangs up aborts the request's signal and cancels the body.
    name: "withRateLimit",
    async start(o, running) {
      const handler = withRateLimit(async (request: Request) => {
        const { key, ms } = query(request.url);
        await running.during(key, ms);
        return new Response("done");
      }, { ...options(o), getClientIp: () => "127.0.0.1" });
      return {
        handle: handler,
        async send(path, dropAfter) {
          const controller = new AbortController();
          let dropped = false;
          const timer = dropAfter === undefined ? undefined : setTimeout(() => {
            dropped = true;
            controller.abort();
          }, dropAfter);
          const response = await handler(new Request(`http://localhost${path}`, { signal: controller.signal }));
          clearTimeout(timer);
          if (dropped) await response.body?.cancel();
          else await response.text();
        },
        close: async () => {},
      };
    },
  },
];

/** A store whose decisions take `ms` longer: a store far away, for a client to hang up while it decides. */
function slowStore(inner: RateLimitStore, ms: number): RateLimitStore {
  return new Proxy(inner, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver);
      if (typeof value !== "function") return value;
      if (property === "reserve" || property === "consume") {
        return (...args: unknown[]) => sleep(ms).then(() => value.apply(target, args));
      }
      return value.bind(target);
    },
  });
}

interface StoreFixture {
  name: string;
  open(): Promise<{ store: RateLimitStore; close(): Promise<void> }>;
}

let redis: RedisInstance | undefined;
const STORES: StoreFixture[] = [
  { name: "memory", open: async () => ({ store: memoryStore(), close: async () => {} }) },
  {
    name: "redis",
    async open() {
      redis ??= await startRedis();
      const client = new IORedis(redis.port, redis.host);
      return { store: redisStore({ client }), close: async () => void client.disconnect() };
    },
  },
];
afterAll(async () => {
  await redis?.stop();
});

let prefixes = 0;

describe.each(STORES)("on $name", (fixture) => {
  let store: RateLimitStore;
  let closeStore: () => Promise<void>;
  beforeAll(async () => {
    ({ store, close: closeStore } = await fixture.open());
  });
  afterAll(async () => {
    await closeStore?.();
  });

  describe.each(TARGETS)("$name", (target) => {
    let app: App | undefined;
    afterEach(async () => {
      await app?.close();
      app = undefined;
    });

    /** Units held per policy for `key`, read through a limiter of its own. */
    const used = async (policy: Policy[], prefix: string, key: string): Promise<Record<string, number>> => {
      const decision = await createRateLimiter({ policy, store, prefix, resilience: false }).peek(key);
      return Object.fromEntries(decision.policies.map((p) => [p.policy, p.limit - p.remaining]));
    };

    it("a client that hangs up while the store decides: settled at once, its handler not run, nothing stranded", async () => {
      const policy = [
        concurrency({ limit: 5, timeout: "5m", name: "in-flight" }),
        fixedWindow({ limit: 1000, window: "1h", name: "tokens" }),
      ];
      const prefix = `gone${++prefixes}:`;
      const running = new Running();
      // The decision takes 150 ms (a store far away; the key function too, as the memory store answers at once).
      const slowKey = async (req: { raw: unknown }) => {
        await sleep(150);
        return keyOf(req.raw);
      };
      app = await target.start(
        { policy, store: slowStore(store, 150), prefix, cost: { estimate: 10 }, key: slowKey, warnings: false },
        running,
      );
      // Five clients hang up while their decisions are under way: every unit would be stranded.
      await Promise.all(Array.from({ length: 5 }, () => app!.send("/x?key=a&ms=10", 50)));
      await sleep(200);
      await running.idle();
      await app.handle.flush();
      if (target.name === "withRateLimit") {
        // A fetch handler runs as the platform asks; its body, cancelled, gives everything back.
        expect((await used(policy, prefix, "a"))["in-flight"]).toBe(0);
      } else {
        // Settled as soon as each decision is in (a loaded machine may still be deciding now);
        // stranded, the units would stay for the policy's 5 minutes.
        const held = await eventually(() => used(policy, prefix, "a"), (u) => u["in-flight"] === 0 && u["tokens"] === 0);
        expect(running.runs).toBe(0);
        expect(held).toEqual({ "in-flight": 0, tokens: 0 });
      }
      const before = running.runs;
      // And the limit still admits five at once.
      await Promise.all(Array.from({ length: 5 }, () => app!.send("/x?key=b&ms=10")));
      expect(running.runs - before).toBe(5);
      await app.handle.flush();
      expect(await used(policy, prefix, "b")).toEqual({ "in-flight": 0, tokens: 50 });
    });

    it("limit 1, 20 clients each hanging up 60 ms after sending: one handler at a time, every unit back", async () => {
      const policy = [concurrency({ limit: 1, timeout: "5m", name: "in-flight" })];
      const prefix = `drop${++prefixes}:`;
      const running = new Running();
      app = await target.start({ policy, store, prefix, warnings: false }, running);
      await app.send("/x?key=warm-up"); // connections and scripts loaded: the first decisions take no longer than the rest
      // One every 20 ms, each hanging up 60 ms after it was sent, each handler running 300 ms.
      await Promise.all(Array.from({ length: 20 }, (_, i) => sleep(i * 20).then(() => app!.send("/x?key=a&ms=300", 60))));
      await running.idle();
      await app.handle.flush();
      expect(running.runs).toBeGreaterThan(1);
      expect(running.mostAtOnce()).toBe(1);
      expect(await used(policy, prefix, "a")).toEqual({ "in-flight": 0 });
    });

    it("200 clients on 5 keys, a third hanging up at random: never more than 5 handlers of a key at once, every unit back", async () => {
      const policy = [
        concurrency({ limit: 5, timeout: "5m", name: "in-flight" }),
        fixedWindow({ limit: 100_000, window: "1h", name: "requests" }),
      ];
      const prefix = `storm${++prefixes}:`;
      const running = new Running();
      app = await target.start({ policy, store, prefix, warnings: false }, running);
      let seed = 7;
      const random = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
      await Promise.all(Array.from({ length: 200 }, (_, i) => {
        const drop = random() < 1 / 3 ? Math.floor(random() * 60) : undefined;
        return sleep(Math.floor(random() * 100)).then(() => app!.send(`/x?key=k${i % 5}&ms=${20 + Math.floor(random() * 60)}`, drop));
      }));
      await running.idle();
      await app.handle.flush();
      expect(running.runs).toBeGreaterThan(20);
      expect(running.mostAtOnce()).toBeLessThanOrEqual(5);
      for (let k = 0; k < 5; k++) expect((await used(policy, prefix, `k${k}`))["in-flight"], `k${k}`).toBe(0);
    });
  });
});
