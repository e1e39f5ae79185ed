// One hello-route server for the HTTP benchmark: `tsx bench/http/server.ts <framework> <variant>`
// where framework is hono | express | koa and variant is none | floodgate | peer. Limits are
// far above the load, so nothing is denied; default headers are on everywhere.
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

const [framework, variant] = process.argv.slice(2) as ["hono" | "express" | "koa", "none" | "floodgate" | "peer"];
const LIMIT = 1_000_000_000;
const WINDOW_MS = 60_000;
const policy = slidingWindow({ limit: LIMIT, window: WINDOW_MS });
const ready = (port: number) => console.log(`listening on ${port}`);
// The harness asks for this process's CPU time (user + system, µs) around the measured run, so
// the server's own cost per request is measured even when the load generator is the bottleneck.
process.on("SIGUSR2", () => {
  const { user, system } = process.cpuUsage();
  console.log(`cpu ${user + system}`);
});

if (framework === "hono") {
  const app = new Hono();
  let mw: MiddlewareHandler | undefined;
  if (variant === "floodgate") mw = floodgateHono({ policy });
  if (variant === "peer") {
    mw = honoRateLimiter({
      windowMs: WINDOW_MS,
      limit: LIMIT,
      keyGenerator: (c) => (c.env as { incoming: { socket: { remoteAddress?: string } } }).incoming.socket.remoteAddress ?? "",
    }) as MiddlewareHandler;
  }
  if (mw) app.use(mw);
  app.get("/", (c) => c.text("hello"));
  serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, (info) => ready(info.port));
} else if (framework === "express") {
  const app = express();
  let mw: RequestHandler | undefined;
  if (variant === "floodgate") mw = floodgateExpress({ policy });
  if (variant === "peer") mw = expressRateLimit({ windowMs: WINDOW_MS, limit: LIMIT }) as unknown as RequestHandler;
  if (mw) app.use(mw);
  app.get("/", (_req, res) => { res.send("hello"); });
  const server = createServer(app).listen(0, "127.0.0.1", () => ready((server.address() as AddressInfo).port));
} else {
  const app = new Koa();
  let mw: Middleware | undefined;
  if (variant === "floodgate") mw = floodgateKoa({ policy });
  if (variant === "peer") mw = koaRateLimit({ driver: "memory", db: new Map(), duration: WINDOW_MS, max: LIMIT, id: (ctx) => ctx.ip }) as Middleware;
  if (mw) app.use(mw);
  app.use((ctx) => { ctx.body = "hello"; });
  const server = createServer(app.callback()).listen(0, "127.0.0.1", () => ready((server.address() as AddressInfo).port));
}
