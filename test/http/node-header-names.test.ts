// The names of the rate-limit headers as the adapters on Node's HTTP server put them on the wire:
// Floodgate's own in lower case (the form Node's `setHeader` handles with the least work), any
// other name (a custom handler's) as it was written. Read from the raw response, where Node keeps
// the case each name was sent in.
import { createServer, request, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { fixedWindow } from "@floodgate/core";
import { HEADER_NAMES, setNodeHeaders } from "@floodgate/core/http";
import { rateLimit as expressRateLimit } from "@floodgate/express";
import { rateLimit as honoRateLimit } from "@floodgate/hono";
import { rateLimit as koaRateLimit } from "@floodgate/koa";
import { serve } from "@hono/node-server";
import express from "express";
import { Hono } from "hono";
import Koa from "koa";
import { afterEach, describe, expect, it } from "vitest";
import { T0 } from "./support.ts";

const clock = (): number => T0;
const options = {
  policy: fixedWindow({ limit: 1, window: "1m" }),
  clock,
  warnings: false as const,
  handler: () => ({ headers: { "X-Why": "quiet" }, body: "later" }),
};
const DEFAULT_NAMES = ["x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset", "ratelimit-policy", "ratelimit"];

const servers: Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) {
    await new Promise((resolve) => {
      s.closeAllConnections();
      s.close(resolve);
    });
  }
});

/** The status and the header names of one GET, in the case they were sent. */
function rawNames(port: number): Promise<{ status: number; names: string[] }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, path: "/api/x" }, (res) => {
      res.resume();
      res.on("end", () => resolve({ status: res.statusCode!, names: res.rawHeaders.filter((_, i) => i % 2 === 0) }));
    });
    req.on("error", reject);
    req.end();
  });
}

/**
 * Each app, and the name its limited response sends the handler's `X-Why` under: as written on
 * Koa and Express; Hono answers a limited request with a fetch `Response`, whose `Headers` keep
 * every name in lower case.
 */
const NODE_APPS: [string, () => Promise<number>, string][] = [
  ["koa", async () => {
    const app = new Koa();
    app.use(koaRateLimit(options));
    app.use((ctx) => {
      ctx.body = "hello";
    });
    return listen(createServer(app.callback()));
  }, "X-Why"],
  ["express", async () => {
    const app = express();
    app.use(expressRateLimit(options));
    app.get("/api/x", (_req, res) => {
      res.send("hello");
    });
    return listen(createServer(app));
  }, "X-Why"],
  ["hono (@hono/node-server)", async () => {
    const app = new Hono();
    app.use(honoRateLimit(options));
    app.get("/api/x", (c) => c.text("hello"));
    const server = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }) as Server;
    servers.push(server);
    await new Promise<void>((resolve) => server.once("listening", () => resolve()));
    return (server.address() as AddressInfo).port;
  }, "x-why"],
];

async function listen(server: Server): Promise<number> {
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return (server.address() as AddressInfo).port;
}

describe.each(NODE_APPS)("%s", (_name, start, handlerName) => {
  it("sends Floodgate's header names in lower case, allowed and limited; a handler's own as written", async () => {
    const port = await start();
    const allowed = await rawNames(port);
    expect(allowed.status).toBe(200);
    for (const name of DEFAULT_NAMES) expect(allowed.names).toContain(name);
    expect(allowed.names.filter((n) => n.toLowerCase().includes("ratelimit"))).toEqual(
      allowed.names.filter((n) => n.toLowerCase().includes("ratelimit")).map((n) => n.toLowerCase()),
    );
    const limited = await rawNames(port);
    expect(limited.status).toBe(429);
    for (const name of [...DEFAULT_NAMES, "retry-after"]) expect(limited.names).toContain(name);
    expect(limited.names).toContain(handlerName);
  });
});

describe("setNodeHeaders", () => {
  it("lower-cases each header name Floodgate writes, and passes any other name as it is", () => {
    const written = Object.entries(HEADER_NAMES).filter(([, name]) => name.length > 2);
    const pairs = [...written.flatMap(([, name]) => [name, `v-${name}`]), "X-Why", "quiet"];
    const set: [string, string][] = [];
    setNodeHeaders(pairs, (name, value) => set.push([name, value]));
    expect(set).toEqual([...written.map(([, name]) => [name.toLowerCase(), `v-${name}`]), ["X-Why", "quiet"]]);
    // Every name of HEADER_NAMES that is a header (not a parameter such as `q` or `qu`) is there.
    expect(written.map(([key]) => key).sort()).toEqual(
      [
        "legacyLimit",
        "legacyRemaining",
        "legacyReset",
        "draftLimit",
        "draftRemaining",
        "draftReset",
        "rateLimit",
        "rateLimitPolicy",
        "retryAfter",
      ]
        .sort(),
    );
  });
});
