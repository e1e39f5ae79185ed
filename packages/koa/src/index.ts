/**
 * Floodgate rate limiting for Koa: a translation layer over `@floodgate/core/http`.
 *
 * @module @floodgate/koa
 */
import {
  createHttpRateLimiter,
  followDecision,
  type HttpRateLimitOptions,
  leftBeforeDecision,
  NodeExchangeBase,
  rateLimitError,
  type RateLimitHandle,
  type RateLimitInfo,
  type RateLimitResult,
  type RequestAccess,
  setNodeHeaders,
  setNodeResponseHeaders,
  targetPath,
  Warnings,
  withHandle,
} from "@floodgate/core/http";
import type { Context, DefaultContext, DefaultState, Middleware, Next, ParameterizedContext } from "koa";

/**
 * The state the middleware sets: `ctx.state.rateLimit` is Floodgate's decision (absent when the
 * request was skipped or allow-listed). Declare it on the app to read it without a cast:
 * `const app = new Koa<RateLimitState>()` (or `new Koa<RateLimitState & YourState>()`).
 */
export interface RateLimitState {
  /** Floodgate's decision for this request; absent when it was skipped or allow-listed. */
  rateLimit?: RateLimitInfo;
}

/**
 * Options of {@link rateLimit}: the shared HTTP options, with the Koa context as `raw` (typed
 * with the app's own state and context when given: `rateLimit<AppState>({ key: (req) => req.raw.state.user?.id })`).
 */
export interface KoaRateLimitOptions<State = DefaultState, Custom = DefaultContext>
  extends HttpRateLimitOptions<ParameterizedContext<State, Custom>> {
  /**
   * Instead of answering a limited request itself, throw it with `ctx.throw(429, message)` (the
   * `statusCode`, and `message` when it is a string) for the app's error middleware to render;
   * every rate-limit header and Retry-After is already set on `ctx` and in the error's
   * `headers`, and the error carries the decision as `rateLimit`. A `denyList` refusal throws 403.
   * Default `false`.
   */
  throw?: boolean;
}

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
 * as `ctx.state.rateLimit` (typed when the app is `new Koa<RateLimitState>()`).
 *
 * @example
 * app.use(rateLimit({ policy: slidingWindow({ limit: 100, window: "1m" }) }));
 */
export function rateLimit<State = DefaultState, Custom = DefaultContext>(
  options: KoaRateLimitOptions<State, Custom>,
): Middleware<State & RateLimitState, Custom> & RateLimitHandle {
  // The contexts this middleware gets are Koa contexts of that app; its accessors read only what every context has.
  const limiter = createHttpRateLimiter(options as KoaRateLimitOptions, ACCESS, { throw: "boolean" });
  const throwing = options.throw === true;
  const userTrust = options?.trustProxy !== undefined;
  const warnings = new Warnings(options.warnings, options.logger ?? console);
  /** The rest of the middleware once decided: answers, or sets the headers and runs the handler. */
  const decided = (ctx: Context, next: Next, result: RateLimitResult | undefined, watched?: NodeExchangeBase): Promise<void> => {
    if (result === undefined) return next();
    const exchange = followDecision(ctx.res, result, watched);
    // The client left: what the request holds is back, and the downstream middleware does not run.
    if (exchange === false) return Promise.resolve();
    ctx.state.rateLimit = result.info;
    if (!result.allowed) {
      const limited = result.response!;
      if (throwing) {
        const error = rateLimitError(result, options.message);
        for (const name in error.headers) ctx.set(name, error.headers[name]!);
        // Koa's default error handler clears the response's headers, then sets `err.headers`.
        ctx.throw(error.status, error.message, { headers: error.headers, rateLimit: error.rateLimit });
      }
      ctx.status = limited.status;
      setNodeHeaders(limited.headers, (name, value) => ctx.set(name, value));
      // A null body would make Koa answer 204: an empty one keeps the status, without a type of its own.
      const typed = ctx.res.hasHeader("Content-Type");
      ctx.body = limited.body ?? "";
      if (!typed) ctx.remove("Content-Type");
      return Promise.resolve();
    }
    // Straight to Node's response: `ctx.set` would add Koa's checks and coercions to each header.
    setNodeResponseHeaders(ctx.res, result.headers);
    // Nothing to settle: nothing to follow either. Else settled at the later of the downstream
    // middleware's end and the response's close: a concurrency unit is held while the handler
    // runs, even after its client has gone.
    return exchange === undefined ? next() : exchange.around(next, () => ({ body: ctx.body }));
  };
  return withHandle(
    // Not `async`: a decision made at once (the memory store) goes on in the same turn, with
    // `next()`'s promise as the middleware's, and no promise of its own to make and resolve.
    // What it throws, Koa's dispatch makes a rejection (as it does for any middleware).
    function floodgateRateLimit(ctx: ParameterizedContext<State & RateLimitState, Custom>, next: Next): Promise<void> {
      // With no trustProxy option, Koa's own `app.proxy` setting decides (through `ctx.ip`).
      const appTrust = !userTrust && ctx.app.proxy;
      // With no `maxIpsCount`, `ctx.ip` is the header's first entry, whatever the client wrote: `trustProxy: true`.
      if (appTrust && !(ctx.app.maxIpsCount > 0)) warnings.emit("trustProxyTrue", "app.proxy is true with no app.maxIpsCount");
      const peer = appTrust ? ctx.ip : ctx.req.socket.remoteAddress;
      if (leftBeforeDecision(peer, ctx.req.socket)) return Promise.resolve();
      // Decided without a promise when the store and callbacks answer at once (the memory store).
      const result = limiter.decide(ctx as unknown as Context, peer, appTrust);
      if (!(result instanceof Promise)) return decided(ctx as unknown as Context, next, result);
      // Else the response's close is watched from now on: a client that leaves while the store decides is seen.
      const watched = new NodeExchangeBase(ctx.res);
      return result.then((later) => decided(ctx as unknown as Context, next, later, watched));
    },
    limiter,
  );
}

export type { HandleOptions, RateLimitError, RateLimitHandle, RateLimitInfo } from "@floodgate/core/http";
