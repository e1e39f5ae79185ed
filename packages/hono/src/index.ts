/**
 * Floodgate rate limiting for Hono: a translation layer over `@floodgate/core/http`.
 *
 * @module @floodgate/hono
 */
import {
  createHttpRateLimiter,
  HANDLER_THREW,
  handOffPending,
  type HttpRateLimitOptions,
  leftBeforeDecision,
  NodeExchangeBase,
  type NodeResponseLike,
  type RateLimitHandle,
  type RateLimitInfo,
  type RequestAccess,
  setNodeHeaders,
  settleAfterBody,
  toFetchResponse,
  withHandle,
  withHeaders,
} from "@floodgate/core/http";
import type { Context, Env, MiddlewareHandler } from "hono";

/**
 * The Hono environment the middleware contributes: `c.get("rateLimit")` is Floodgate's decision
 * (absent when the request was skipped or allow-listed). `app.use(rateLimit(...))` carries it into
 * the routes chained after it; or declare it: `new Hono<RateLimitEnv>()`.
 */
export type RateLimitEnv = {
  /** The context variables the middleware sets. */
  Variables: {
    /** Floodgate's decision for this request. */
    rateLimit: RateLimitInfo;
  };
};

/**
 * Options of {@link rateLimit}: the shared HTTP options, plus the runtime's `getConnInfo`. `E`
 * is the app's own `Env`: `key(req)`, `cost(req)`, `skip(req)`... see `req.raw` as `Context<E>`,
 * with the variables an auth middleware set typed (`rateLimit<AppEnv>({ key: (req) => req.raw.get("user")?.id })`).
 */
export interface HonoRateLimitOptions<E extends Env = Env> extends HttpRateLimitOptions<Context<E>> {
  /**
   * The runtime's `getConnInfo` (from `hono/bun`, `hono/deno`, `@hono/node-server/conninfo`,
   * `hono/cloudflare-workers`...), giving the socket address. Default: the Node server's socket
   * when running on `@hono/node-server`, else none.
   */
  getConnInfo?: (c: Context<E>) => {
    /** The connection's remote end. */
    remote: {
      /** The socket peer's IP address, when the runtime knows it. */
      address?: string;
    };
  };
}

const ACCESS: RequestAccess<Context> = {
  method: (c) => c.req.method,
  path: (c) => c.req.path,
  header: (c, name) => c.req.header(name),
};

/** What `@hono/node-server` puts in `c.env`: the Node request and response. */
type NodeBindings = {
  incoming?: { socket?: { remoteAddress?: string; destroyed?: boolean } };
  outgoing?: { setHeader(name: string, value: string): unknown };
} | undefined;

const nodeSocketIp = (c: Context): string | undefined => (c.env as NodeBindings)?.incoming?.socket?.remoteAddress;

/** Workers' ExecutionContext, or `undefined` elsewhere (Hono's getter throws without one). */
function workersContext(c: Context): unknown {
  try {
    return c.executionCtx;
  } catch {
    return undefined;
  }
}

/**
 * Rate-limiting middleware for Hono. Options are validated here, once; the decision is readable
 * as `c.get("rateLimit")`.
 *
 * @example
 * import { getConnInfo } from "@hono/node-server/conninfo";
 * app.use("*", rateLimit({ policy: slidingWindow({ limit: 100, window: "1m" }), getConnInfo }));
 */
export function rateLimit<E extends Env = Env>(options: HonoRateLimitOptions<E>): MiddlewareHandler<E & RateLimitEnv> & RateLimitHandle {
  // Its callbacks get this app's contexts, which are Context<E>; the accessors read only what every context has.
  const limiter = createHttpRateLimiter(options as unknown as HonoRateLimitOptions, ACCESS, "getConnInfo");
  const getConnInfo = (options as unknown as HonoRateLimitOptions).getConnInfo;
  const socketIp = getConnInfo === undefined ? nodeSocketIp : (c: Context) => getConnInfo(c).remote.address;
  return withHandle<MiddlewareHandler<E & RateLimitEnv>>(async function floodgateRateLimit(c, next) {
    const peer = socketIp(c);
    const node = c.env as NodeBindings;
    // 499 (client closed request) is only what the runtime records: nothing is sent.
    if (leftBeforeDecision(peer, node?.incoming?.socket)) return new Response(null, { status: 499 });
    const outgoing = node?.outgoing;
    const onNode = typeof outgoing?.setHeader === "function";
    // On Node, the response's close is watched from now on: a client that leaves while the store decides is seen.
    const exchange = onNode ? new NodeExchangeBase(outgoing as unknown as NodeResponseLike) : undefined;
    const result = await limiter.decide(c, peer);
    if (result === undefined) return next();
    // The client left meanwhile: what the request holds is back, and the handler does not run.
    if (exchange !== undefined && !exchange.start(result)) return new Response(null, { status: 499 });
    c.set("rateLimit", result.info);
    // What is left after the response, to the platform's waitUntil: Workers' (Hono's getter throws
    // without one), Netlify's (`hono/netlify` passes its context as `c.env.context`), or Vercel's.
    handOffPending(result, () => [workersContext(c), (c.env as { context?: unknown } | undefined)?.context]);
    if (!result.allowed) return toFetchResponse(result);
    const headers = result.headers;
    // On @hono/node-server, Node's own header store, which it merges into whatever Response the
    // handler returns (raw ones too) without a Headers object per request; elsewhere, prepared
    // before the handler, so c.text()/c.json() build the response with them at once.
    // Floodgate's names in lower case: what Node handles with the least work, and what Headers keep anyway.
    setNodeHeaders(headers, onNode ? (name, value) => outgoing!.setHeader(name, value) : (name, value) => c.header(name, value));
    // On Node, settled at the later of the handler's end and the response's close (0: the client
    // left before it was sent); elsewhere when its body has been sent (0: cancelled or failed on
    // the way, or the client has gone).
    if (exchange !== undefined) {
      // Nothing to settle: nothing to follow either.
      if (!result.settles) return void (await next());
      // The handler threw and the app's error handler answered (c.error): not a completed response.
      await exchange.around(next, () => ({ threw: c.error !== undefined }));
      // A body that fails on the way: @hono/node-server may still end the response as if complete.
      if (result.holds && c.error === undefined && c.res.body !== null) {
        c.res = settleAfterBody({ settle: (status) => status === 0 && exchange.bodyFailed() }, c.res, undefined);
      }
      return;
    }
    // An error that escapes the app: the runtime answers 500.
    await next().catch((error: unknown) => {
      result.settle(HANDLER_THREW);
      throw error;
    });
    // The handler threw and the app's error handler answered: not a completed response.
    if (c.error !== undefined) result.settle(HANDLER_THREW);
    let res = c.res;
    if (result.settles) {
      if (c.req.method === "HEAD") result.settle(c.req.raw.signal?.aborted ? 0 : res.status, res);
      else res = settleAfterBody(result, res, c.req.raw.signal);
    }
    // A handler that returned its own Response skipped the prepared headers: added to a copy
    // (its own headers may be immutable, as a proxied fetch response's are).
    if (headers.length > 0 && !res.headers.has(headers[0]!)) res = withHeaders(res, headers);
    if (res !== c.res) c.res = res;
  }, limiter);
}

export type { HandleOptions, RateLimitHandle, RateLimitInfo } from "@floodgate/core/http";
