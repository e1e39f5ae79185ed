// What each integration adds in its own terms: Express's handler in Express's form, Koa's
// `throw: true`, and the fetch wrapper's getRateLimit(request) and promise. The real frameworks,
// listening on 127.0.0.1 (port 0); time injected.
import type { AddressInfo } from "node:net";
import { createServer, type Server } from "node:http";
import { fixedWindow, getRateLimit, type RateLimitInfo, withRateLimit } from "@floodgate/core";
import { type ExpressHandler, expressHandler, rateLimit as expressRateLimit } from "@floodgate/express";
import { rateLimit as koaRateLimit, type RateLimitError, type RateLimitState } from "@floodgate/koa";
import express from "express";
import express4 from "express4";
import Koa from "koa";
import { afterEach, describe, expect, it } from "vitest";
import { createEnv, hasRateLimitHeaders, legacyHeaders } from "./support.ts";

const perMinute = (limit: number) => fixedWindow({ limit, window: "1m" });
let servers: Server[] = [];
afterEach(async () => {
  for (const server of servers) {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
  servers = [];
});

async function listen(handler: Parameters<typeof createServer>[1]): Promise<string> {
  const server = createServer(handler);
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

describe.each([["express 5", express], ["express 4", express4 as unknown as typeof express]] as const)(
  "%s: handler in Express's form",
  (_name, make) => {
    const app = (handler: Parameters<typeof expressRateLimit>[0]["handler"], extra: Record<string, unknown> = {}) => {
      const env = createEnv();
      const a = make();
      a.use(expressRateLimit({ policy: perMinute(1), clock: env.clock, handler, ...extra }));
      a.get("/slow-down", (_req, res) => {
        res.send("slow down");
      });
      a.get(make === express ? "/{*rest}" : "*", (_req, res) => { // Express 4 spells a catch-all `*`
        res.send("ok");
      });
      a.use((error: Error, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
        res.status(418).set("x-error", error.message).send(`error handler: ${error.message}`);
      });
      return a;
    };

    it("redirects (a bare function of four parameters, as express-rate-limit's handler): the headers are set before it runs", async () => {
      let seen: RateLimitInfo | undefined;
      // As a JavaScript app passes it: TypeScript types this form through expressHandler() (the next tests).
      const bare = (_req: express.Request, res: express.Response, _next: express.NextFunction, info: RateLimitInfo) => {
        seen = info;
        expect(res.getHeader("retry-after")).toBe("60");
        expect(res.statusCode).toBe(429);
        res.redirect(303, "/slow-down");
      };
      const base = await listen(app(bare as unknown as ExpressHandler));
      expect((await fetch(`${base}/a`)).status).toBe(200);
      const reply = await fetch(`${base}/a`, { redirect: "manual" });
      expect(reply.status).toBe(303);
      expect(reply.headers.get("location")).toBe("/slow-down");
      expect(reply.headers.get("retry-after")).toBe("60");
      expect(legacyHeaders(reply.headers)?.remaining).toBe(0);
      expect(seen).toMatchObject({ allowed: false, limit: 1, remaining: 0, source: "store" });
    });

    it("passes an error to the app's error handler with next(error), and a rejected promise too", async () => {
      const viaNext = await listen(app(expressHandler((_req, _res, next, info) => next(new Error(`limited by ${info.policy}`)))));
      await fetch(`${viaNext}/a`);
      const reply = await fetch(`${viaNext}/a`);
      expect(reply.status).toBe(418);
      expect(await reply.text()).toBe("error handler: limited by 1-per-1m");
      expect(reply.headers.get("retry-after")).toBe("60"); // set before the handler ran

      const rejecting = await listen(app(expressHandler(async () => {
        throw new Error("template missing");
      })));
      await fetch(`${rejecting}/a`);
      expect((await fetch(`${rejecting}/a`)).headers.get("x-error")).toBe("template missing");
    });

    it("streams its own body, with the status it chose", async () => {
      const base = await listen(app(expressHandler((_req, res) => {
        res.status(503).type("text/plain");
        res.write("come back ");
        setTimeout(() => res.end("later"), 5);
      })));
      await fetch(`${base}/a`);
      const reply = await fetch(`${base}/a`);
      expect(reply.status).toBe(503);
      expect(reply.headers.get("content-type")).toMatch(/^text\/plain/);
      expect(await reply.text()).toBe("come back later");
      expect(reply.headers.get("retry-after")).toBe("60");
    });

    it("a denyList refusal is answered 403 by Floodgate, not by the handler", async () => {
      let called = 0;
      const base = await listen(app(expressHandler(() => called++), { denyList: ["127.0.0.1"] }));
      const reply = await fetch(`${base}/a`);
      expect(reply.status).toBe(403);
      expect(called).toBe(0);
    });
  },
);

describe("koa: throw: true", () => {
  const start = async (withErrorMiddleware: boolean, extra: Record<string, unknown> = {}) => {
    const env = createEnv();
    const app = new Koa<RateLimitState>();
    const caught: RateLimitError[] = [];
    if (withErrorMiddleware) {
      app.use(async (ctx, next) => {
        try {
          await next();
        } catch (error) {
          const limited = error as RateLimitError;
          caught.push(limited);
          ctx.status = limited.status;
          ctx.body = `<p>${limited.message} (retry in ${ctx.response.get("Retry-After")} s)</p>`;
        }
      });
    }
    app.use(koaRateLimit({ policy: perMinute(1), clock: env.clock, throw: true, message: "Slow down.", ...extra }));
    app.use((ctx) => {
      ctx.body = { remaining: ctx.state.rateLimit?.remaining };
    });
    app.silent = true;
    return { base: await listen(app.callback()), caught };
  };

  it("throws 429 for the app's error middleware, with every rate-limit header and Retry-After already set", async () => {
    const { base, caught } = await start(true);
    expect(await (await fetch(`${base}/a`)).json()).toEqual({ remaining: 0 });
    const reply = await fetch(`${base}/a`);
    expect(reply.status).toBe(429);
    expect(await reply.text()).toBe("<p>Slow down. (retry in 60 s)</p>");
    expect(reply.headers.get("content-type")).toMatch(/^text\/html/);
    expect(legacyHeaders(reply.headers)).toMatchObject({ limit: 1, remaining: 0 });
    expect(reply.headers.get("ratelimit")).toBe('"1-per-1m";r=0;t=60');
    expect(caught).toHaveLength(1);
    expect(caught[0]).toMatchObject({ status: 429, expose: true, headers: { "Retry-After": "60" } });
    expect(caught[0]!.rateLimit).toMatchObject({ allowed: false, remaining: 0, source: "store" });
  });

  it("Koa's own error handler sends the error's status, message and headers", async () => {
    const { base } = await start(false);
    await fetch(`${base}/a`);
    const reply = await fetch(`${base}/a`);
    expect(reply.status).toBe(429);
    expect(await reply.text()).toBe("Slow down.");
    expect(reply.headers.get("retry-after")).toBe("60");
    expect(legacyHeaders(reply.headers)?.remaining).toBe(0);
  });

  it("a denyList refusal throws 403, with no rate-limit headers", async () => {
    const { base, caught } = await start(true, { denyList: ["127.0.0.1"] });
    const reply = await fetch(`${base}/a`);
    expect(reply.status).toBe(403);
    expect(hasRateLimitHeaders(reply.headers)).toBe(false);
    expect(caught[0]).toMatchObject({ status: 403, message: "Access denied." });
  });

  it("throw must be a boolean", () => {
    expect(() => koaRateLimit({ policy: perMinute(1), throw: "yes" as unknown as boolean })).toThrow(
      'rateLimit(): invalid option `throw`: received "yes"; expected a boolean.',
    );
  });
});

describe("fetch: getRateLimit(request) and a promise always", () => {
  it("the handler reads the decision of its request; none for a request not limited", async () => {
    const env = createEnv();
    const handler = withRateLimit((request: Request) => Response.json(getRateLimit(request) ?? null), {
      rules: { "GET /api/*": perMinute(2) },
      clock: env.clock,
      getClientIp: () => "192.0.2.1",
    });
    const first = await (await handler(new Request("http://localhost/api/a"))).json();
    expect(first).toMatchObject({ allowed: true, remaining: 1, key: "192.0.2.1", rule: "GET /api/*", source: "store" });
    expect(await (await handler(new Request("http://localhost/other"))).json()).toBeNull();
    expect(getRateLimit(new Request("http://localhost/api/a"))).toBeUndefined();
  });

  it("returns a promise whatever the handler does: a Response, a promise, or a throw", async () => {
    const sync = withRateLimit(() => new Response("sync"), { policy: perMinute(5), getClientIp: () => "192.0.2.1" });
    const answer = sync(new Request("http://localhost/"));
    expect(answer).toBeInstanceOf(Promise);
    expect(await (await answer).text()).toBe("sync");
    const notLimited = withRateLimit(() => new Response("skipped"), { policy: perMinute(5), skip: () => true });
    const skipped = notLimited(new Request("http://localhost/"));
    expect(skipped).toBeInstanceOf(Promise);
    expect(await (await skipped).text()).toBe("skipped");
    const throwing = withRateLimit(() => {
      throw new Error("boom");
    }, { policy: perMinute(5), skip: () => true });
    const rejected = throwing(new Request("http://localhost/"));
    expect(rejected).toBeInstanceOf(Promise);
    await expect(rejected).rejects.toThrow("boom");
  });
});
