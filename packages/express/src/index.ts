/**
 * Floodgate rate limiting for Express 4 and 5: a translation layer over `@floodgate/core/http`.
 *
 * @module @floodgate/express
 */
import {
  createHttpRateLimiter,
  type HttpRateLimitOptions,
  type RateLimitHandle,
  type RateLimitInfo,
  type RequestAccess,
  settleOnClose,
  targetPath,
  Warnings,
  withHandle,
} from "@floodgate/core/http";
import type { NextFunction, Request, RequestHandler, Response } from "express";

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
    // The client left while earlier middleware ran, and took its address with it: no one will read
    // the answer, and counting it under the key every address-less request shares would spend
    // their quota. Neither the handler runs nor anything is charged.
    if (peer === undefined && req.socket.destroyed) return;
    limiter.decideRequest(req, peer, appTrust).then((result) => {
      if (result === undefined) return next();
      (req as RateLimitedRequest).rateLimit = result.info;
      const headers = result.headers;
      // Answered already (a timeout middleware, say): nothing more to write, and no 429 to send;
      // what the response's end settles still follows it.
      if (res.headersSent) {
        if (!result.allowed) return;
        settleOnClose(result, res);
        return next();
      }
      if (!result.allowed) {
        const denied = result.response!;
        res.status(denied.status);
        const answer = own !== undefined && result.info.source !== "denyList";
        for (let i = 0; i < denied.headers.length; i += 2) {
          if (!answer || denied.headers[i] !== "Content-Type") res.setHeader(denied.headers[i]!, denied.headers[i + 1]!);
        }
        return answer ? own(req, res, next, result.info) : void res.end(denied.body);
      }
      // One read of `res.setHeader`, not one per header: Express's objects change shape per
      // request, so their property reads tend to miss V8's inline caches.
      const setHeader = res.setHeader;
      for (let i = 0; i < headers.length; i += 2) setHeader.call(res, headers[i]!, headers[i + 1]!);
      settleOnClose(result, res);
      next();
    }).then(undefined, next); // a throw while answering (a header Node refuses) goes to the app's error handler
  }, limiter);
}

export type { HandleOptions, RateLimitHandle, RateLimitInfo } from "@floodgate/core/http";
