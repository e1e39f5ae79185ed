// The integrations the settlement tests run against, each with one route whose behaviour the
// request's query asks for: report units, set an `x-usage` header, stream chunks (reporting as
// it goes), answer a status, or throw. Hono twice (in process through app.request, which takes
// the fetch path of the adapter, and on @hono/node-server, which takes Node's), Express 5 and 4,
// Koa (real servers on 127.0.0.1, port 0) and withRateLimit (real Request objects).
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Readable } from "node:stream";
import { getRateLimit, type HttpRateLimitOptions, type RateLimitHandle, type RateLimitInfo, withRateLimit } from "@floodgate/core";
import { rateLimit as expressRateLimit, type RateLimitedRequest, rateLimitErrors } from "@floodgate/express";
import { rateLimit as honoRateLimit, type RateLimitEnv } from "@floodgate/hono";
import { rateLimit as koaRateLimit } from "@floodgate/koa";
import { serve } from "@hono/node-server";
import express, { type NextFunction, type Request as ExpressRequest, type Response as ExpressResponse } from "express";
import express4 from "express4";
import { Hono } from "hono";
import Koa from "koa";

/** What the route does, from the query: `?report=3&usage=7&chunks=5&each=1&status=500&fail=1`. */
export interface Plan {
  status: number;
  /** Units reported before answering. */
  report: number | undefined;
  /** The `x-usage` response header. */
  usage: string | undefined;
  /** Chunks streamed (0: a plain body), one every {@link CHUNK_GAP_MS}. */
  chunks: number;
  /** Report the chunks sent so far with each. */
  each: boolean;
  /** Throw instead of answering. */
  fail: boolean;
  /** The streamed body fails after this many chunks. */
  broken: number | undefined;
}

/** The pause between streamed chunks: long beside the time a client takes to abort after one. */
export const CHUNK_GAP_MS = 300;

export function planOf(url: string): Plan {
  const q = new URL(url, "http://localhost").searchParams;
  const num = (name: string): number | undefined => (q.has(name) ? Number(q.get(name)) : undefined);
  return {
    status: num("status") ?? 200,
    report: num("report"),
    usage: q.get("usage") ?? undefined,
    chunks: num("chunks") ?? 0,
    each: q.get("each") === "1",
    fail: q.get("fail") === "1",
    broken: num("broken"),
  };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The streamed body: chunk i is reported (with `each`) when it is produced. */
async function* chunks(plan: Plan, info: RateLimitInfo | undefined): AsyncGenerator<string> {
  for (let i = 1; i <= plan.chunks; i++) {
    if (i > 1) await sleep(CHUNK_GAP_MS);
    if (plan.each) info?.report(i);
    yield `chunk ${i}\n`;
    if (i === plan.broken) throw new Error("the body failed");
  }
}

const encoder = new TextEncoder();
function webStream(plan: Plan, info: RateLimitInfo | undefined): ReadableStream<Uint8Array> {
  const source = chunks(plan, info);
  return new ReadableStream({
    async pull(controller) {
      const next = await source.next();
      if (next.done) controller.close();
      else controller.enqueue(encoder.encode(next.value));
    },
    async cancel() {
      await source.return(undefined);
    },
  });
}

/** The route as a fetch handler (Hono and withRateLimit). */
function fetchRoute(url: string, info: RateLimitInfo | undefined): Response {
  const plan = planOf(url);
  if (plan.report !== undefined) info?.report(plan.report);
  if (plan.fail) throw new Error("the handler failed");
  const headers: Record<string, string> = plan.usage === undefined ? {} : { "x-usage": plan.usage };
  return new Response(plan.chunks === 0 ? "done" : webStream(plan, info), { status: plan.status, headers });
}

/** The route for Express 4 and 5 (errors through `next`: Express 4 does not catch a rejection). */
async function expressRoute(req: ExpressRequest, res: ExpressResponse, next: NextFunction): Promise<void> {
  try {
    const plan = planOf(req.originalUrl);
    const info = (req as RateLimitedRequest).rateLimit;
    if (plan.report !== undefined) info?.report(plan.report);
    if (plan.fail) throw new Error("the handler failed");
    res.status(plan.status);
    if (plan.usage !== undefined) res.setHeader("x-usage", plan.usage);
    if (plan.chunks === 0) {
      res.send("done");
      return;
    }
    for await (const chunk of chunks(plan, info)) {
      // The client has gone: the handler stops, and says so by destroying the response.
      if (res.destroyed) return void res.destroy();
      res.write(chunk);
    }
    res.end();
  } catch (error) {
    next(error);
  }
}

export interface Sent {
  status: number;
  headers: Headers;
  /** The body, or what was read of it before aborting. */
  body: string;
}

export interface SettleApp {
  /**
   * Sends a request; with `abortAfter`, reads that many chunks of the body, then aborts (a real
   * client abort over HTTP; in process, the body stream cancelled, as a runtime does).
   */
  send(path: string, options?: { abortAfter?: number; headers?: Record<string, string> }): Promise<Sent>;
  /** The middleware's (or handler's) `flush()`. */
  flush(): Promise<void>;
  close(): Promise<void>;
}

export interface SettleTarget {
  name: string;
  start(options: HttpRateLimitOptions<any>): Promise<SettleApp>;
}

/** Reads `abortAfter` chunks (or the whole body), then cancels. */
async function read(response: Response, abortAfter: number | undefined, abort: () => void): Promise<Sent> {
  if (abortAfter === undefined) return { status: response.status, headers: response.headers, body: await response.text() };
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let body = "";
  while (body.split("\n").length - 1 < abortAfter) {
    const chunk = await reader.read();
    if (chunk.done) break;
    body += decoder.decode(chunk.value);
  }
  abort();
  await reader.cancel().catch(() => {});
  return { status: response.status, headers: response.headers, body };
}

function inProcess(fetchLike: (request: Request) => Promise<Response> | Response, handle: RateLimitHandle): SettleApp {
  return {
    flush: () => handle.flush(),
    async send(path, { abortAfter, headers = {} } = {}) {
      const response = await fetchLike(new Request(`http://localhost${path}`, { headers }));
      return read(response, abortAfter, () => {});
    },
    close: async () => {},
  };
}

async function overHttp(server: Server, handle: RateLimitHandle): Promise<SettleApp> {
  if (!server.listening) await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    flush: () => handle.flush(),
    async send(path, { abortAfter, headers = {} } = {}) {
      const controller = new AbortController();
      const response = await fetch(base + path, { headers, signal: controller.signal });
      return read(response, abortAfter, () => controller.abort());
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function honoApp(options: HttpRateLimitOptions<any>): SettleApp {
  const app = new Hono<RateLimitEnv>();
  const limit = honoRateLimit({ getConnInfo: () => ({ remote: { address: "127.0.0.1" } }), ...options });
  app.use("/api/*", limit);
  app.all("/api/*", (c) => fetchRoute(c.req.url, c.get("rateLimit")));
  app.onError((_error, c) => c.text("failed", 500));
  return inProcess((request) => app.request(request), limit);
}

export const SETTLE_TARGETS: readonly SettleTarget[] = [
  {
    name: "hono (app.request)",
    start: async (options) => honoApp(options),
  },
  {
    name: "hono (node-server)",
    async start(options) {
      const app = new Hono<RateLimitEnv>();
      // On Node, the socket's address (no getConnInfo): the adapter's Node path.
      const limit = honoRateLimit(options);
      app.use("/api/*", limit);
      app.all("/api/*", (c) => fetchRoute(c.req.url, c.get("rateLimit")));
      app.onError((_error, c) => c.text("failed", 500));
      const server = await new Promise<Server>((resolve) => {
        const s = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, () => resolve(s as Server));
      });
      return overHttp(server, limit);
    },
  },
  {
    name: "express",
    async start(options) {
      const app = express();
      const limit = expressRateLimit(options);
      app.use("/api/", limit, expressRoute);
      app.use((_error: unknown, _req: ExpressRequest, res: ExpressResponse, _next: NextFunction) => {
        res.status(500).send("failed");
      });
      return overHttp(createServer(app), limit);
    },
  },
  {
    name: "express 4",
    async start(options) {
      const app = express4();
      const limit = expressRateLimit(options);
      app.use("/api/", limit, expressRoute as never);
      // Express 4's router records no error on the request: the tap tells Floodgate.
      app.use(rateLimitErrors() as never);
      app.use(
        ((_error: unknown, _req: ExpressRequest, res: ExpressResponse, _next: NextFunction) => {
          res.status(500).send("failed");
        }) as never,
      );
      return overHttp(createServer(app), limit);
    },
  },
  {
    name: "koa",
    async start(options) {
      const app = new Koa();
      app.silent = true;
      const limit = koaRateLimit(options);
      app.use(limit);
      app.use((ctx) => {
        const plan = planOf(ctx.originalUrl);
        const info = ctx.state.rateLimit as RateLimitInfo | undefined;
        if (plan.report !== undefined) info?.report(plan.report);
        if (plan.fail) throw new Error("the handler failed");
        ctx.status = plan.status;
        if (plan.usage !== undefined) ctx.set("x-usage", plan.usage);
        ctx.body = plan.chunks === 0 ? "done" : Readable.from(chunks(plan, info), { objectMode: false, highWaterMark: 1 });
      });
      return overHttp(createServer(app.callback()), limit);
    },
  },
  {
    name: "fetch",
    async start(options) {
      const handler = withRateLimit((request: Request) => fetchRoute(request.url, getRateLimit(request)), {
        getClientIp: () => "127.0.0.1",
        ...options,
      });
      return inProcess(async (request) => {
        try {
          return await handler(request);
        } catch {
          return new Response("failed", { status: 500 }); // what a runtime answers
        }
      }, handler);
    },
  },
];
