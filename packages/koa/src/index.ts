/**
 * Floodgate rate limiting for Koa: a translation layer over `@floodgate/core/http`.
 *
 * @module @floodgate/koa
 */
import {
  createHttpRateLimiter,
  type HttpRateLimitOptions,
  type RateLimitHandle,
  type RequestAccess,
  settleOnClose,
  targetPath,
  Warnings,
  withHandle,
} from "@floodgate/core/http";
import type { Context, Middleware, Next } from "koa";

/** Options of {@link rateLimit}: the shared HTTP options, with the Koa context as `raw`. */
export type KoaRateLimitOptions = HttpRateLimitOptions<Context>;

const ACCESS: RequestAccess<Context> = {
  method: (ctx) => ctx.method,
  // The full path even under a mounted sub-app (koa-mount rewrites `ctx.path`).
  path: (ctx) => targetPath(ctx.originalUrl ?? ctx.url),
  header: (ctx, name) => {
    const value = ctx.req.headers[name];
    return Array.isArray(value) ? value.join(", ") : value;
  },
  caseSensitiveRouting: routersSensitive,
};

/** What @koa/router's `routes()` middleware carries: the router and its options. */
type RouterMiddleware = { router?: { opts?: { sensitive?: boolean } } };

/**
 * How the app's @koa/router routers (mounted with `app.use(router.routes())`) match paths: case-
 * insensitively unless built with `sensitive: true`. `undefined` when the app has none.
 */
function routersSensitive(ctx: Context): boolean | undefined {
  let sensitive: boolean | undefined;
  for (const middleware of ctx.app.middleware as readonly RouterMiddleware[]) {
    const router = middleware.router;
    if (router === undefined) continue;
    if (router.opts?.sensitive !== true) return false;
    sensitive = true;
  }
  return sensitive;
}

/**
 * Rate-limiting middleware for Koa. Options are validated here, once; the decision is readable
 * as `ctx.state.rateLimit`.
 *
 * @example
 * app.use(rateLimit({ policy: slidingWindow({ limit: 100, window: "1m" }) }));
 */
export function rateLimit(options: KoaRateLimitOptions): Middleware & RateLimitHandle {
  const limiter = createHttpRateLimiter(options, ACCESS);
  const userTrust = options?.trustProxy !== undefined;
  const warnings = new Warnings(options.warnings, options.logger ?? console);
  return withHandle(async function floodgateRateLimit(ctx: Context, next: Next): Promise<void> {
    // With no trustProxy option, Koa's own `app.proxy` setting decides (through `ctx.ip`).
    const appTrust = !userTrust && ctx.app.proxy;
    // With no `maxIpsCount`, `ctx.ip` is the header's first entry, whatever the client wrote: `trustProxy: true`.
    if (appTrust && !(ctx.app.maxIpsCount > 0)) warnings.emit("trustProxyTrue", "app.proxy is true with no app.maxIpsCount");
    const peer = appTrust ? ctx.ip : ctx.req.socket.remoteAddress;
    // The client left while earlier middleware ran, and took its address with it: no one will read
    // the answer, and counting it under the key every address-less request shares would spend
    // their quota. Neither the downstream middleware runs nor anything is charged.
    if (!peer && ctx.req.socket.destroyed) return;
    const result = await limiter.decideRequest(ctx, peer, appTrust);
    if (result === undefined) return next();
    ctx.state.rateLimit = result.info;
    if (!result.allowed) {
      const denied = result.response!;
      ctx.status = denied.status;
      for (let i = 0; i < denied.headers.length; i += 2) ctx.set(denied.headers[i]!, denied.headers[i + 1]!);
      // A null body would make Koa answer 204: an empty one keeps the status, without a type of its own.
      const typed = ctx.res.hasHeader("Content-Type");
      ctx.body = denied.body ?? "";
      if (!typed) ctx.remove("Content-Type");
      return;
    }
    const headers = result.headers;
    // Straight to Node's response: `ctx.set` would add Koa's checks and coercions to each header.
    const res = ctx.res;
    for (let i = 0; i < headers.length; i += 2) res.setHeader(headers[i]!, headers[i + 1]!);
    settleOnClose(result, res);
    await next();
  }, limiter);
}

export type { HandleOptions, RateLimitHandle, RateLimitInfo } from "@floodgate/core/http";
