// The integrations the disconnect suites run against, each over a real socket (withRateLimit in
// process), with a handler that runs as long as the request's `ms` asks, counted per key.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { type HttpRateLimitOptions, type RateLimitHandle, withRateLimit } from "@floodgate/core";
import { rateLimit as expressRateLimit } from "@floodgate/express";
import { rateLimit as honoRateLimit } from "@floodgate/hono";
import { rateLimit as koaRateLimit } from "@floodgate/koa";
import { serve } from "@hono/node-server";
import express from "express";
import express4 from "express4";
import { Hono } from "hono";
import Koa from "koa";

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Handlers running now and the most ever running at once, per key. */
export class Running {
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
export const query = (url: string) => {
  const q = new URL(url, "http://localhost").searchParams;
  return { key: q.get("key") ?? "k", ms: Number(q.get("ms") ?? 0) };
};

export interface App {
  /** Sends a request; with `dropAfter`, the client hangs up that many ms after sending it. Resolves once it is answered or dropped. */
  send(path: string, dropAfter?: number): Promise<void>;
  handle: RateLimitHandle;
  close(): Promise<void>;
}

export interface Target {
  name: string;
  start(options: HttpRateLimitOptions<any>, running: Running): Promise<App>;
}

export async function overHttp(server: Server, handle: RateLimitHandle): Promise<App> {
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
export function keyOf(raw: any): string {
  const url: string = raw.originalUrl ?? raw.url ?? raw.req?.url ?? raw.raw?.url;
  return query(url).key;
}

export const options = (o: HttpRateLimitOptions<any>) => ({ ...o, key: o.key ?? ((req: { raw: unknown }) => keyOf(req.raw)) });

export const TARGETS: Target[] = [
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
