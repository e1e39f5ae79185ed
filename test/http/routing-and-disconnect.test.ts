// Rules match paths as the framework routes them (case), and a client that disconnected before the
// middleware ran neither reaches the handler nor spends the quota address-less requests share.
import { createServer, type IncomingMessage, type Server } from "node:http";
import { type AddressInfo, connect } from "node:net";
import { createRateLimiter, fixedWindow, memoryStore, type RateLimiter } from "@floodgate/core";
import { rateLimit as expressRateLimit } from "@floodgate/express";
import { rateLimit as honoRateLimit } from "@floodgate/hono";
import { rateLimit as koaRateLimit } from "@floodgate/koa";
import Router from "@koa/router";
import { serve } from "@hono/node-server";
import express from "express";
import express4 from "express4";
import { Hono } from "hono";
import Koa from "koa";
import { afterEach, describe, expect, it } from "vitest";
import { T0 } from "./support.ts";

const clock = (): number => T0;
const servers: Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) {
    await new Promise((resolve) => {
      s.closeAllConnections();
      s.close(resolve);
    });
  }
});

async function listen(server: Server): Promise<string> {
  servers.push(server);
  if (!server.listening) await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const loginRules = () => ({
  "POST /api/login": fixedWindow({ limit: 2, window: "1m", name: "login" }),
  default: fixedWindow({ limit: 100, window: "1m", name: "rest" }),
});

async function post(base: string, path: string): Promise<{ status: number; policy: string | null; body: string }> {
  const response = await fetch(base + path, { method: "POST" });
  const body = await response.text();
  return { status: response.status, policy: response.headers.get("ratelimit-policy"), body };
}

describe("rule paths follow the framework's case sensitivity", () => {
  for (const [name, make] of [["express 5", express], ["express 4", express4]] as const) {
    describe(name, () => {
      it("by default, as the app routes: /API/LOGIN reaches the login handler and is counted by its rule", async () => {
        const app = make();
        app.use(expressRateLimit({ rules: loginRules(), clock, warnings: false }));
        app.post("/api/login", (_req, res) => {
          res.send("login");
        });
        const base = await listen(createServer(app));
        const replies = [await post(base, "/api/login"), await post(base, "/API/LOGIN"), await post(base, "/Api/Login")];
        expect(replies.map((r) => r.status)).toEqual([200, 200, 429]);
      });

      it("caseSensitive: true over the app's case-insensitive routing is rejected, never a bypass", async () => {
        const app = make();
        app.use(expressRateLimit({ rules: loginRules(), clock, caseSensitive: true, warnings: false }));
        app.post("/api/login", (_req, res) => {
          res.send("login");
        });
        const errors: unknown[] = [];
        app.use((error: unknown, _req: unknown, res: express.Response, _next: unknown) => {
          errors.push(error);
          res.status(500).send("error");
        });
        const base = await listen(createServer(app));
        expect((await post(base, "/API/LOGIN")).status).toBe(500);
        expect(String(errors[0])).toMatch(/`caseSensitive` is true, but the framework routes paths case-insensitively/);
        expect((errors[0] as { code?: string }).code).toBe("INVALID_OPTION");
      });

      it("with case sensitive routing on, rules follow it unasked: /API/LOGIN is another route, not the login rule's", async () => {
        const app = make();
        app.set("case sensitive routing", true);
        app.use(expressRateLimit({ rules: loginRules(), clock, warnings: false }));
        app.post("/api/login", (_req, res) => {
          res.send("login");
        });
        const base = await listen(createServer(app));
        const other = await post(base, "/API/LOGIN");
        expect(other.status).toBe(404);
        expect(other.policy).toMatch(/^"rest"/);
        expect((await post(base, "/api/login")).policy).toMatch(/^"login"/);
        // caseSensitive: true agrees with the app: accepted.
        const strict = make();
        strict.set("case sensitive routing", true);
        strict.use(expressRateLimit({ rules: loginRules(), clock, caseSensitive: true, warnings: false }));
        strict.post("/api/login", (_req, res) => {
          res.send("login");
        });
        expect((await post(await listen(createServer(strict)), "/api/login")).status).toBe(200);
      });
    });
  }

  describe("koa with @koa/router", () => {
    const build = (sensitive: boolean | undefined, caseSensitive: boolean | undefined) => {
      const app = new Koa();
      app.use(koaRateLimit({ rules: loginRules(), clock, caseSensitive, warnings: false }));
      const router = new Router(sensitive === undefined ? {} : { sensitive });
      router.post("/api/login", (ctx) => {
        ctx.body = "login";
      });
      app.use(router.routes());
      app.silent = true;
      return app;
    };

    it("by default, as the router routes (case-insensitively unless built with sensitive: true)", async () => {
      const base = await listen(createServer(build(undefined, undefined).callback()));
      expect([(await post(base, "/api/login")).status, (await post(base, "/API/LOGIN")).status, (await post(base, "/Api/Login")).status])
        .toEqual([200, 200, 429]);
      const sensitive = await listen(createServer(build(true, undefined).callback()));
      const other = await post(sensitive, "/API/LOGIN");
      expect(other.status).toBe(404);
      expect(other.policy).toMatch(/^"rest"/);
    });

    it("caseSensitive: true over a case-insensitive router is rejected; over a sensitive one, accepted", async () => {
      const base = await listen(createServer(build(undefined, true).callback()));
      expect((await post(base, "/API/LOGIN")).status).toBe(500);
      const agreed = await listen(createServer(build(true, true).callback()));
      expect((await post(agreed, "/api/login")).status).toBe(200);
    });
  });

  it("hono: its router is case-sensitive, so rules that ignore case can only count more, never less", async () => {
    const app = new Hono();
    app.use(honoRateLimit({ rules: loginRules(), clock, getConnInfo: () => ({ remote: { address: "127.0.0.1" } }), warnings: false }));
    app.post("/api/login", (c) => c.text("login"));
    const send = async (path: string) => (await app.request(path, { method: "POST" })).status;
    expect([await send("/api/login"), await send("/API/LOGIN"), await send("/api/login")]).toEqual([200, 404, 429]);
    const strict = new Hono();
    strict.use(
      honoRateLimit({
        rules: loginRules(),
        clock,
        caseSensitive: true,
        getConnInfo: () => ({ remote: { address: "127.0.0.1" } }),
        warnings: false,
      }),
    );
    strict.post("/api/login", (c) => c.text("login"));
    expect([await (await strict.request("/API/LOGIN", { method: "POST" })).status]).toEqual([404]);
    expect((await strict.request("/api/login", { method: "POST" })).headers.get("ratelimit-policy")).toMatch(/^"login"/);
  });
});

/** Requests the earlier middleware has seen arrive, and a way to wait for the next. */
function arrivals() {
  let count = 0;
  let waiting: (() => void) | undefined;
  return {
    arrived(): void {
      count++;
      waiting?.();
    },
    async next(target: number): Promise<void> {
      while (count < target) {
        await new Promise<void>((resolve) => {
          waiting = resolve;
        });
      }
    },
  };
}

/**
 * Sends a request over a real socket and, once the server has it, resets the connection (the
 * server's socket is destroyed, its address gone) while the earlier middleware still runs.
 */
async function fireAndDisconnect(base: string, path: string, seen: ReturnType<typeof arrivals>, nth: number): Promise<void> {
  const { port } = new URL(base);
  const socket = connect(Number(port), "127.0.0.1");
  socket.on("error", () => {});
  await new Promise<void>((resolve) => socket.once("connect", resolve));
  socket.write(`GET ${path} HTTP/1.1\r\nHost: x\r\nX-Disconnect: 1\r\nContent-Length: 0\r\n\r\n`);
  await seen.next(nth);
  socket.resetAndDestroy();
}

/** Earlier middleware: for a request that will disconnect, waits until its connection is gone. */
const untilClosed = (req: IncomingMessage, seen: ReturnType<typeof arrivals>): Promise<void> =>
  new Promise((resolve) => {
    if (req.headers["x-disconnect"] === undefined || req.socket.destroyed) return resolve();
    req.socket.once("close", () => setImmediate(resolve));
    seen.arrived();
  });

describe("a client that disconnects while earlier middleware runs", () => {
  const policy = fixedWindow({ limit: 3, window: "1m" });
  /** The address-less key must be untouched: its full quota left. */
  const untouched = async (limiter: RateLimiter) => expect((await limiter.peek("unknown")).remaining).toBe(3);

  /** Fires `n` requests that disconnect early, then waits for the server to have handled them all. */
  async function fire(
    base: string,
    seen: ReturnType<typeof arrivals>,
    reached: () => number,
    handled: () => number,
    n: number,
  ): Promise<void> {
    for (let i = 1; i <= n; i++) await fireAndDisconnect(base, "/work", seen, i);
    const deadline = Date.now() + 5000;
    while (handled() < n && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    expect(handled()).toBe(n);
    expect(reached()).toBe(0);
  }

  it("express: the handler does not run and nothing is charged", async () => {
    const limiter = createRateLimiter({ policy, store: memoryStore(), clock });
    const seen = arrivals();
    let reached = 0;
    let handled = 0;
    const app = express();
    app.use(async (req, _res, next) => {
      await untilClosed(req, seen);
      next();
      setImmediate(() => handled++);
    });
    app.use(expressRateLimit({ limiter, warnings: false }));
    app.get("/work", (_req, res) => {
      reached++;
      res.send("done");
    });
    const base = await listen(createServer(app));
    await fire(base, seen, () => reached, () => handled, 5);
    await untouched(limiter);
    // A client that stays is counted as ever.
    expect((await fetch(`${base}/work`)).status).toBe(200);
    expect(reached).toBe(1);
  });

  it("koa: downstream middleware does not run and nothing is charged", async () => {
    const limiter = createRateLimiter({ policy, store: memoryStore(), clock });
    const seen = arrivals();
    let reached = 0;
    let handled = 0;
    const app = new Koa();
    app.silent = true; // Koa logs the reset connection's ECONNRESET
    app.use(async (ctx, next) => {
      await untilClosed(ctx.req, seen);
      await next();
      handled++;
    });
    app.use(koaRateLimit({ limiter, warnings: false }));
    app.use((ctx) => {
      reached++;
      ctx.body = "done";
    });
    const base = await listen(createServer(app.callback()));
    await fire(base, seen, () => reached, () => handled, 5);
    await untouched(limiter);
    expect((await fetch(`${base}/work`)).status).toBe(200);
    expect(reached).toBe(1);
  });

  it("hono on @hono/node-server: the handler does not run and nothing is charged", async () => {
    const limiter = createRateLimiter({ policy, store: memoryStore(), clock });
    const seen = arrivals();
    let reached = 0;
    let handled = 0;
    const app = new Hono();
    app.use(async (c, next) => {
      await untilClosed((c.env as { incoming: IncomingMessage }).incoming, seen);
      try {
        await next();
      } finally {
        handled++;
      }
    });
    app.use(honoRateLimit({ limiter, warnings: false }));
    app.get("/work", (c) => {
      reached++;
      return c.text("done");
    });
    const server = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }) as Server;
    await new Promise<void>((resolve) => (server.listening ? resolve() : server.once("listening", resolve)));
    const base = await listen(server);
    await fire(base, seen, () => reached, () => handled, 5);
    await untouched(limiter);
    expect((await fetch(`${base}/work`)).status).toBe(200);
    expect(reached).toBe(1);
  });
});
