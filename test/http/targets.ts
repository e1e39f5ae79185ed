// The four real frameworks the scenario table runs against. Each app mounts the limiter for
// /api paths and answers with the status asked for in `x-test-status` (default 200).
import type { AddressInfo } from "node:net";
import { createServer, type Server } from "node:http";
import { type HttpRateLimitOptions, type RateLimitHandle, withRateLimit } from "@floodgate/core";
import { rateLimit as expressRateLimit, type RateLimitedRequest } from "@floodgate/express";
import { rateLimit as honoRateLimit, type RateLimitEnv } from "@floodgate/hono";
import { rateLimit as koaRateLimit } from "@floodgate/koa";
import express from "express";
import express4 from "express4";
import { Hono } from "hono";
import Koa from "koa";
import { LAMBDA_TARGETS } from "./lambda-targets.ts";

/** A response, whichever framework produced it. */
export interface Reply {
  status: number;
  headers: Headers;
  body: string;
}

export interface SendOptions {
  method?: string;
  headers?: Record<string, string>;
  /** Status the route answers with. */
  status?: number;
}

export interface App {
  send(path: string, options?: SendOptions): Promise<Reply>;
  /** The handle on the counters that the middleware (or the fetch wrapper) carries. */
  handle: RateLimitHandle;
  close(): Promise<void>;
}

export interface Target {
  name: string;
  /** Every target's socket address is 127.0.0.1 (real loopback, or injected as such). */
  start(options: HttpRateLimitOptions<any>, extra?: { expressTrustProxy?: unknown }): Promise<App>;
}

const statusOf = (value: string | undefined): number => (value === undefined ? 200 : Number(value));

async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function overHttp(base: string, server: Server, handle: RateLimitHandle): App {
  return {
    handle,
    async send(path, { method = "GET", headers = {}, status } = {}) {
      const response = await fetch(base + path, {
        method,
        headers: { ...headers, ...(status === undefined ? {} : { "x-test-status": String(status) }) },
      });
      return { status: response.status, headers: response.headers, body: await response.text() };
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const request = (path: string, { method = "GET", headers = {}, status }: SendOptions = {}): Request =>
  new Request(`http://localhost${path}`, {
    method,
    headers: { ...headers, ...(status === undefined ? {} : { "x-test-status": String(status) }) },
  });

export const hono: Target = {
  name: "hono",
  async start(options) {
    const app = new Hono();
    const api = new Hono<RateLimitEnv>();
    const handle = honoRateLimit({ getConnInfo: () => ({ remote: { address: "127.0.0.1" } }), ...options });
    app.use("/api/*", handle);
    api.all("*", (c) => c.json({ rateLimit: c.get("rateLimit") ?? null }, statusOf(c.req.header("x-test-status")) as 200));
    app.route("/api", api);
    app.all("*", (c) => c.text("outside"));
    return {
      handle,
      async send(path, opts) {
        const response = await app.request(request(path, opts));
        return { status: response.status, headers: response.headers, body: await response.text() };
      },
      close: async () => {},
    };
  },
};

export const expressTarget: Target = {
  name: "express",
  async start(options, extra = {}) {
    const app = express();
    if (extra.expressTrustProxy !== undefined) app.set("trust proxy", extra.expressTrustProxy);
    const router = express.Router();
    router.all("/{*rest}", (req, res) => {
      res.status(statusOf(req.header("x-test-status"))).json({ rateLimit: (req as RateLimitedRequest).rateLimit ?? null });
    });
    const handle = expressRateLimit(options);
    app.use("/api/", handle, router);
    app.use((_req, res) => {
      res.send("outside");
    });
    const server = createServer(app);
    return overHttp(await listen(server), server, handle);
  },
};

/** The same middleware on Express 4 (its router spells a catch-all `*`). */
export const express4Target: Target = {
  name: "express 4",
  async start(options, extra = {}) {
    const app = express4();
    if (extra.expressTrustProxy !== undefined) app.set("trust proxy", extra.expressTrustProxy);
    const router = express4.Router();
    router.all("*", (req, res) => {
      res.status(statusOf(req.header("x-test-status"))).json({ rateLimit: (req as RateLimitedRequest).rateLimit ?? null });
    });
    const handle = expressRateLimit(options);
    app.use("/api/", handle, router);
    app.use((_req, res) => {
      res.send("outside");
    });
    const server = createServer(app);
    return overHttp(await listen(server), server, handle);
  },
};

export const koa: Target = {
  name: "koa",
  async start(options) {
    const app = new Koa();
    const limiter = koaRateLimit(options);
    const handle = limiter;
    app.use(async (ctx, next) => (ctx.path.startsWith("/api/") ? limiter(ctx, next) : next()));
    app.use((ctx) => {
      if (!ctx.path.startsWith("/api/")) {
        ctx.body = "outside";
        return;
      }
      ctx.status = statusOf(ctx.get("x-test-status") || undefined);
      ctx.body = { rateLimit: ctx.state.rateLimit ?? null };
    });
    const server = createServer(app.callback());
    return overHttp(await listen(server), server, handle);
  },
};

export const fetchTarget: Target = {
  name: "fetch",
  async start(options) {
    const handler = withRateLimit(
      (req: Request) => Response.json({ rateLimit: null }, { status: statusOf(req.headers.get("x-test-status") ?? undefined) }),
      { getClientIp: () => "127.0.0.1", ...options },
    );
    return {
      handle: handler,
      async send(path, opts) {
        const response = await handler(request(path, opts));
        return { status: response.status, headers: response.headers, body: await response.text() };
      },
      close: async () => {},
    };
  },
};

export const TARGETS: readonly Target[] = [hono, expressTarget, express4Target, koa, fetchTarget, ...LAMBDA_TARGETS];
