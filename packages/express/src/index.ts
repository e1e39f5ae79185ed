/**
 * Floodgate rate limiting for Express 4 and 5: a translation layer over `@floodgate/core/http`.
 *
 * @module @floodgate/express
 */
import {
  createHttpRateLimiter,
  type HttpRateLimitOptions,
  leftBeforeDecision,
  NodeExchange,
  type RateLimitHandle,
  type RateLimitInfo,
  type RequestAccess,
  setNodeHeaders,
  targetPath,
  thenOrNow,
  Warnings,
  withHandle,
} from "@floodgate/core/http";
import type { ErrorRequestHandler, NextFunction, Request, RequestHandler, Response } from "express";

/**
 * A `handler` in Express's own form: it answers the limited request itself (send, render,
 * redirect, stream) or passes it on with `next()` / `next(error)`. The status (429 or
 * `statusCode`), the rate-limit headers and Retry-After are set on `res` before it runs. A
 * rejected promise goes to `next`.
 */
export type ExpressHandlerFunction = (req: Request, res: Response, next: NextFunction, info: RateLimitInfo) => unknown;

/** A handler in Express's form, for TypeScript: made by {@link expressHandler}. */
export interface ExpressHandler {
  /** The handler. */
  readonly express: ExpressHandlerFunction;
}

/**
 * Marks `handler` as Express's form `(req, res, next, info)`, so TypeScript types its parameters
 * (a plain function declaring three or more parameters is taken in that form too, as
 * express-rate-limit's `handler(req, res, next, options)` is).
 *
 * @example
 * rateLimit({ policy, handler: expressHandler((req, res, next, info) => res.render("slow-down", { info })) });
 */
export function expressHandler(handler: ExpressHandlerFunction): ExpressHandler {
  return { express: handler };
}

/**
 * An Express request after the middleware ran: `req.rateLimit` is Floodgate's decision (absent when
 * the request was skipped or allow-listed). Or `import "@floodgate/express/augment"` once, to type
 * `req.rateLimit` on every request without this type (an opt-in global augmentation, left out of
 * the JSR package, which accepts none).
 */
export type RateLimitedRequest = Request & {
  /** Floodgate's decision for this request; absent when it was skipped or allow-listed. */
  rateLimit?: RateLimitInfo;
};

/**
 * Options of {@link rateLimit}: the shared HTTP options, with the Express request as `raw`;
 * `handler` also in Express's own form (see {@link expressHandler}).
 */
export interface ExpressRateLimitOptions extends Omit<HttpRateLimitOptions<Request>, "handler"> {
  /**
   * Builds the limited response: `(req, info) => ({ status?, headers?, body? })`, which Floodgate
   * sends; or Express's form, `expressHandler((req, res, next, info) => ...)` (or any function of
   * 3+ parameters), which answers itself or calls `next`.
   */
  handler?: HttpRateLimitOptions<Request>["handler"] | ExpressHandler;
}

const ACCESS: RequestAccess<Request> = {
  method: (req) => req.method,
  // The full path even when mounted (`app.use("/api/", ...)` makes `req.path` mount-relative).
  path: (req) => targetPath(req.originalUrl ?? req.url),
  header: (req, name) => {
    const value = req.headers[name];
    return Array.isArray(value) ? value.join(", ") : value;
  },
  // The app's own setting (off by default): rules then match paths as its routes do.
  caseSensitiveRouting: (req) => (typeof req.app?.get === "function" ? Boolean(req.app.get("case sensitive routing")) : undefined),
};

/**
 * Rate-limiting middleware for Express 4 and 5. Options are validated here, once; the decision
 * is readable as `req.rateLimit`. With no `trustProxy` option, the app's `trust proxy` setting
 * decides (through `req.ip`).
 *
 * @example
 * app.use("/api/", rateLimit({ policy: slidingWindow({ limit: 100, window: "1m" }) }));
 */
export function rateLimit(options: ExpressRateLimitOptions): RequestHandler & RateLimitHandle {
  const given: unknown = options?.handler;
  const own = typeof given === "function" && given.length >= 3
    ? given as ExpressHandlerFunction
    : typeof given === "object" && given !== null && typeof (given as ExpressHandler).express === "function"
    ? (given as ExpressHandler).express
    : undefined;
  // Express's form answers for itself: core prepares the default response, whose status and headers it gets.
  const limiter = createHttpRateLimiter(
    own === undefined ? options as HttpRateLimitOptions<Request> : { ...options, handler: undefined },
    ACCESS,
  );
  const userTrust = options?.trustProxy !== undefined;
  const warnings = new Warnings(options.warnings, options.logger ?? console);
  return withHandle(function floodgateRateLimit(req: Request, res: Response, next: NextFunction): void {
    // When the user sets nothing and the app trusts proxies, Express has resolved `req.ip` already.
    const trust: unknown = userTrust ? false : req.app?.get("trust proxy");
    // `true` trusts every hop, as `trustProxy: true` does: `req.ip` is whatever the client wrote first.
    if (trust === true) warnings.emit("trustProxyTrue", 'the app\'s "trust proxy" is true');
    const appTrust = Boolean(trust);
    const peer = appTrust ? req.ip : req.socket.remoteAddress;
    if (leftBeforeDecision(peer, req.socket)) return;
    // Watching the response's close from now on: a client that leaves while the store decides is seen.
    const exchange = new NodeExchange(res);
    // Answered at once when the store and callbacks decide synchronously (the memory store). A
    // throw while deciding or answering (a header Node refuses) goes to the app's error handler.
    thenOrNow(() => limiter.decide(req, peer, appTrust), (result) => {
      if (result === undefined) return next();
      // The client left meanwhile: what the request holds is back, and the handler does not run.
      if (!exchange.start(result)) return;
      (req as RateLimitedRequest).rateLimit = result.info;
      if (!result.allowed) {
        // Answered already (a timeout middleware, say): no 429 to send.
        if (res.headersSent) return;
        const limited = result.response!;
        res.status(limited.status);
        const answer = own !== undefined && result.info.source !== "denyList";
        setNodeHeaders(limited.headers, (name, value) => answer && name === "Content-Type" ? undefined : res.setHeader(name, value));
        return answer ? own(req, res, next, result.info) : void res.end(limited.body);
      }
      // One read of `res.setHeader`, not one per header: Express's objects change shape per
      // request, so their property reads tend to miss V8's inline caches. Answered already: nothing
      // more to write, and what the response's end settles still follows it.
      const setHeader = res.setHeader;
      if (!res.headersSent) setNodeHeaders(result.headers, (name, value) => setHeader.call(res, name, value));
      exchange.followResponse(res, () => threw(req));
      next();
    }, next);
  }, limiter);
}

/** Where Express 5's router (2.3 and later) records, on the request, each error passed to `next`. */
const ROUTER_ERRORS = Symbol.for("router.tracing.publishedErrors");
/** Requests whose error reached {@link rateLimitErrors}. */
const FAILED = new WeakSet<object>();

/** Whether an error of this request went to Express's error handling (the handler threw, or called `next(error)`). */
function threw(req: Request): boolean {
  const recorded = (req as unknown as Record<symbol, { size?: number } | undefined>)[ROUTER_ERRORS];
  return FAILED.has(req) || (recorded?.size ?? 0) > 0;
}

/**
 * An Express error-handling middleware that tells Floodgate a request's handler failed, so its
 * cost settled later settles the handler's last report (else the estimate) rather than what
 * `actual` reads off the error page. Mount it after the routes and before the app's own error
 * handlers; it passes the error on. Express 5 with its router 2.3 or later records errors on the
 * request itself and needs none; Express 4 does.
 *
 * @example
 * app.use(rateLimit({ policy, cost: { estimate: 100, actual } }));
 * app.use(routes);
 * app.use(rateLimitErrors());
 * app.use((err, req, res, next) => res.status(500).send("failed"));
 */
export function rateLimitErrors(): ErrorRequestHandler {
  return function floodgateErrors(error: unknown, req: Request, _res: Response, next: NextFunction): void {
    FAILED.add(req);
    next(error);
  };
}

export type { HandleOptions, RateLimitHandle, RateLimitInfo } from "@floodgate/core/http";
