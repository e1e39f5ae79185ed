// The login route on each integration: the per-address limiter, then the per-user one, then the
// password check. POST /login with a JSON body { user, password }.
import { type HttpRateLimitOptions, type RateLimitStore, withRateLimit } from "@floodgate/core";
import { rateLimit as expressRateLimit } from "@floodgate/express";
import { rateLimit as honoRateLimit } from "@floodgate/hono";
import { rateLimit as koaRateLimit } from "@floodgate/koa";
import express from "express";
import { Hono } from "hono";
import Koa from "koa";
import { checkPassword, loggedIn, loginOptions, userKey } from "./login.ts";

/** Options for every app: a clock, trusted proxies and so on. */
export type Extra = Partial<HttpRateLimitOptions<any>>;

/** Hono: the body is read once by the key function; Hono keeps it for the route. */
export function honoApp(store: RateLimitStore, extra: Extra = {}): Hono {
  const app = new Hono();
  const byIp = honoRateLimit({ ...loginOptions(store, extra), prefix: "login:ip:" });
  const byUser = honoRateLimit({
    ...loginOptions(store, extra),
    prefix: "login:user:",
    key: async (req) => userKey((await req.raw.req.json().catch(() => ({}))).user),
  });
  app.post("/login", byIp, byUser, async (c) => {
    const { user, password } = await c.req.json().catch(() => ({}));
    if (!checkPassword(user, password)) return c.json({ error: "invalid credentials" }, 401);
    await loggedIn(byUser, user);
    return c.json({ token: "demo" });
  });
  return app;
}

/** Express 4 or 5: `express.json()` first, so the key function reads `req.body`. */
export function expressApp(make: typeof express, store: RateLimitStore, extra: Extra = {}): express.Express {
  const app = make();
  const byIp = expressRateLimit({ ...loginOptions(store, extra), prefix: "login:ip:" });
  const byUser = expressRateLimit({
    ...loginOptions(store, extra),
    prefix: "login:user:",
    key: (req) => userKey((req.raw as express.Request).body?.user),
  });
  app.post("/login", make.json(), byIp, byUser, (req, res, next) => {
    const { user, password } = req.body ?? {};
    if (!checkPassword(user, password)) {
      res.status(401).json({ error: "invalid credentials" });
      return;
    }
    loggedIn(byUser, user).then(() => res.json({ token: "demo" }), next);
  });
  return app;
}

/** Koa: a small body reader first (use your body parser), so the key function reads the body. */
export function koaApp(store: RateLimitStore, extra: Extra = {}): Koa {
  const app = new Koa();
  const byIp = koaRateLimit({ ...loginOptions(store, extra), prefix: "login:ip:" });
  const byUser = koaRateLimit({
    ...loginOptions(store, extra),
    prefix: "login:user:",
    key: (req) => userKey((req.raw as Koa.Context).state.body?.user),
  });
  app.use(async (ctx, next) => {
    if (ctx.method !== "POST" || ctx.path !== "/login") return next();
    let text = "";
    for await (const chunk of ctx.req) text += chunk;
    try {
      ctx.state.body = JSON.parse(text);
    } catch {
      ctx.state.body = {};
    }
    await byIp(ctx, () => byUser(ctx, next));
  });
  app.use(async (ctx) => {
    const { user, password } = ctx.state.body ?? {};
    if (!checkPassword(user, password)) {
      ctx.status = 401;
      ctx.body = { error: "invalid credentials" };
      return;
    }
    await loggedIn(byUser, user);
    ctx.body = { token: "demo" };
  });
  return app;
}

/** A fetch handler (Deno, Bun, Workers): two wrappers, the per-user one inside. */
export function fetchHandler(
  store: RateLimitStore,
  extra: Extra = {},
  getClientIp?: (request: Request) => string | undefined,
): (request: Request) => Promise<Response> {
  const login = async (request: Request): Promise<Response> => {
    const { user, password } = await request.json().catch(() => ({}));
    if (!checkPassword(user, password)) return Response.json({ error: "invalid credentials" }, { status: 401 });
    await loggedIn(byUser, user);
    return Response.json({ token: "demo" });
  };
  const byUser = withRateLimit(login, {
    ...loginOptions(store, extra),
    prefix: "login:user:",
    key: async (req) => userKey((await req.raw.clone().json().catch(() => ({}))).user),
    getClientIp,
  });
  const byIp = withRateLimit(byUser, { ...loginOptions(store, extra), prefix: "login:ip:", getClientIp });
  return async (request) => byIp(request);
}
