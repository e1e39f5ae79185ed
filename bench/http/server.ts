// One hello-route server for the HTTP benchmark: `tsx bench/http/server.ts <framework> <variant>`
// where framework is hono | express | koa and variant is none | floodgate | floodgate-otel | floodgate-legacy | peer | headers | floor.
// `floodgate-otel` adds @floodgate/opentelemetry with no SDK registered (the API's no-op instruments).
// `floodgate-legacy` sends only the legacy headers (`headers: "legacy"`: X-RateLimit-Limit, -Remaining,
// -Reset), the three koa-ratelimit sends.
// Limits are far above the load, so nothing is denied; default headers are on everywhere. Two
// variants are no limiter but the least one must do, through the cheapest public API of the
// framework: `headers` only sets five constant headers shaped like Floodgate's defaults;
// `floor` also reads what any limiter reads (method, path, socket address) and publishes a
// result object on the request as the adapters do (`c.set`, `req.rateLimit`, `ctx.state`).
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { slidingWindow } from "@floodgate/core";
import { rateLimit as floodgateExpress } from "@floodgate/express";
import { rateLimit as floodgateHono } from "@floodgate/hono";
import { rateLimit as floodgateKoa } from "@floodgate/koa";
import { serve } from "@hono/node-server";
import express, { type RequestHandler } from "express";
import expressRateLimit from "express-rate-limit";
import { Hono, type MiddlewareHandler } from "hono";
import { rateLimiter as honoRateLimiter } from "hono-rate-limiter";
import Koa, { type Middleware } from "koa";
import koaRateLimit from "koa-ratelimit";

const [framework, variant] = process.argv.slice(2) as [
  "hono" | "express" | "koa",
  "none" | "floodgate" | "floodgate-otel" | "floodgate-legacy" | "peer" | "headers" | "floor",
];
const LIMIT = 1_000_000_000;
const WINDOW_MS = 60_000;
const policy = slidingWindow({ limit: LIMIT, window: WINDOW_MS });
/**
 * The options of the Floodgate variants: with the telemetry in for `floodgate-otel` (imported
 * only then: a baseline copy from before the package runs this file too).
 */
const telemetry = variant === "floodgate-otel" ? (await import("@floodgate/opentelemetry")).floodgateTelemetry() : undefined;
const floodgateOptions = () =>
  variant === "floodgate-legacy"
    ? { policy, headers: "legacy" as const }
    : telemetry === undefined
    ? { policy }
    : telemetry.instrument({ policy });
const floodgate = variant === "floodgate" || variant === "floodgate-otel" || variant === "floodgate-legacy";
const ready = (port: number) => console.log(`listening on ${port}`);
/** The port to listen on: `BENCH_PORT` when set (a harness given a range of ports), else any free one. */
const PORT = Number(process.env.BENCH_PORT ?? 0);
/**
 * Floodgate's default headers (legacy + draft-11) for this policy, as constants, named as the
 * adapters on Node send them (in lower case, the form Node's `setHeader` handles with least work).
 */
const FIVE_HEADERS: readonly (readonly [string, string])[] = [
  ["x-ratelimit-limit", "1000000000"],
  ["x-ratelimit-remaining", "999999999"],
  ["x-ratelimit-reset", "1764470000"],
  ["ratelimit-policy", '"1000000000-per-1m";q=1000000000;w=60'],
  ["ratelimit", '"1000000000-per-1m";r=999999999;t=60'],
];
// The harness asks for this process's CPU time (user + system, µs) around the measured run, so
// the server's own cost per request is measured even when the load generator is the bottleneck.
process.on("SIGUSR2", () => {
  const { user, system } = process.cpuUsage();
  console.log(`cpu ${user + system}`);
});
// A normal exit on SIGINT/SIGTERM, so `--cpu-prof` and valgrind write their reports.
for (const signal of ["SIGINT", "SIGTERM"] as const) process.on(signal, () => process.exit(0));

if (framework === "hono") {
  const app = new Hono();
  let mw: MiddlewareHandler | undefined;
  if (floodgate) mw = floodgateHono(floodgateOptions());
  if (variant === "peer") {
    mw = honoRateLimiter({
      windowMs: WINDOW_MS,
      limit: LIMIT,
      keyGenerator: (c) => (c.env as { incoming: { socket: { remoteAddress?: string } } }).incoming.socket.remoteAddress ?? "",
    }) as MiddlewareHandler;
  }
  if (variant === "headers" || variant === "floor") {
    type Bindings = { incoming: { socket: { remoteAddress?: string } }; outgoing: { setHeader(name: string, value: string): void } };
    mw = async (c, next) => {
      if (variant === "floor") {
        c.set(
          "rateLimit" as never,
          { method: c.req.method, path: c.req.path, ip: (c.env as Bindings).incoming.socket.remoteAddress } as never,
        );
      }
      // What @floodgate/hono does on @hono/node-server: Node's own header store.
      const outgoing = (c.env as Bindings).outgoing;
      for (const [name, value] of FIVE_HEADERS) outgoing.setHeader(name, value);
      await next();
    };
  }
  if (mw) app.use(mw);
  app.get("/", (c) => c.text("hello"));
  serve({ fetch: app.fetch, port: PORT, hostname: "127.0.0.1" }, (info) => ready(info.port));
} else if (framework === "express") {
  const app = express();
  let mw: RequestHandler | undefined;
  if (floodgate) mw = floodgateExpress(floodgateOptions());
  if (variant === "peer") mw = expressRateLimit({ windowMs: WINDOW_MS, limit: LIMIT }) as unknown as RequestHandler;
  if (variant === "headers" || variant === "floor") {
    mw = (req, res, next) => {
      if (variant === "floor") {
        (req as { rateLimit?: object }).rateLimit = { method: req.method, path: req.originalUrl, ip: req.socket.remoteAddress };
      }
      for (const [name, value] of FIVE_HEADERS) res.setHeader(name, value);
      next();
    };
  }
  if (mw) app.use(mw);
  app.get("/", (_req, res) => {
    res.send("hello");
  });
  const server = createServer(app).listen(PORT, "127.0.0.1", () => ready((server.address() as AddressInfo).port));
} else {
  const app = new Koa();
  let mw: Middleware | undefined;
  if (floodgate) mw = floodgateKoa(floodgateOptions());
  if (variant === "peer") {
    mw = koaRateLimit({
      driver: "memory",
      db: new Map(),
      duration: WINDOW_MS,
      max: LIMIT,
      id: (ctx) => ctx.ip,
    }) as Middleware;
  }
  if (variant === "headers" || variant === "floor") {
    mw = (ctx, next) => {
      if (variant === "floor") ctx.state.rateLimit = { method: ctx.method, path: ctx.originalUrl, ip: ctx.req.socket.remoteAddress };
      // What @floodgate/koa does: Node's response directly (cheaper than `ctx.set`).
      for (const [name, value] of FIVE_HEADERS) ctx.res.setHeader(name, value);
      return next();
    };
  }
  if (mw) app.use(mw);
  app.use((ctx) => {
    ctx.body = "hello";
  });
  const server = createServer(app.callback()).listen(PORT, "127.0.0.1", () => ready((server.address() as AddressInfo).port));
}
