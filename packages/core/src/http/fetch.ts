import { describeValue, FloodgateError } from "../errors.ts";
import type { HttpRateLimitOptions, RequestAccess } from "./options.ts";
import { createHttpRateLimiter, type RateLimitHandle, withHandle } from "./rate-limit.ts";
import type { RateLimitInfo, RateLimitResult } from "./result.ts";
import { HANDLER_THREW, setHeaders } from "./node-response.ts";
import { handOffPending } from "./wait-until.ts";

/** A fetch-style handler: Deno.serve, Bun.serve, Cloudflare Workers, Vercel/Next route handlers. */
export type FetchHandler<Rest extends unknown[]> = (request: Request, ...rest: Rest) => Response | Promise<Response>;

/**
 * What {@link withRateLimit} returns: the handler's signature, always answering with a promise.
 * It takes whatever else the runtime passes too (a Worker's `env` and `ctx`), which it passes on
 * and hands to the platform's `waitUntil`, whether or not the handler declares them.
 */
export type RateLimitedFetchHandler<Rest extends unknown[]> = (request: Request, ...rest: [...Rest, ...unknown[]]) => Promise<Response>;

/** The decision of each request `withRateLimit` passed on, for {@link getRateLimit}. */
const DECISIONS = new WeakMap<Request, RateLimitInfo>();

/**
 * The rate-limit decision for `request`, inside a handler wrapped by {@link withRateLimit}:
 * `limit`, `remaining`, `resetAt`, `key`, `rule`, `source`...; `undefined` when the request was
 * not limited (skipped, allow-listed, no rule applies, cost 0) or is not one the wrapper passed on.
 * What `c.get("rateLimit")` and `req.rateLimit` are in the middlewares: read the figures, or
 * `report()` the units used when the cost is settled after the response.
 *
 * @example
 * const handler = withRateLimit((request) => {
 *   const rateLimit = getRateLimit(request);
 *   return Response.json({ remaining: rateLimit?.remaining });
 * }, { policy: slidingWindow({ limit: 100, window: "1m" }) });
 */
export function getRateLimit(request: Request): RateLimitInfo | undefined {
  return DECISIONS.get(request);
}

/** Options of {@link withRateLimit}. */
export interface WithRateLimitOptions<Rest extends unknown[] = unknown[]> extends HttpRateLimitOptions<Request> {
  /**
   * The connection's peer address, from whatever the runtime passes beside the request (Deno's
   * `info.remoteAddr.hostname`, Bun's `server.requestIP(request)?.address`). Default: tries those
   * two, else none (set `trustProxy` to a preset such as `"cloudflare"` on platforms that put the
   * address in a header).
   */
  getClientIp?: (request: Request, ...rest: Rest) => string | undefined;
}

const FETCH_ACCESS: RequestAccess<Request> = {
  method: (request) => request.method,
  // `Request.url` is absolute and has no fragment: the path runs from the first "/" after the authority to the query.
  path: (request) => {
    const url = request.url;
    const start = url.indexOf("/", url.indexOf("//") + 2);
    if (start === -1) return "/";
    const query = url.indexOf("?", start);
    return query === -1 ? url.slice(start) : url.slice(start, query);
  },
  header: (request, name) => request.headers.get(name) ?? undefined,
};

/** Deno's `ServeHandlerInfo` or Bun's `Server`, duck-typed. */
function runtimeClientIp(request: Request, ...rest: unknown[]): string | undefined {
  const second = rest[0] as { remoteAddr?: { hostname?: string }; requestIP?: (r: Request) => { address?: string } | null } | undefined;
  if (second === undefined || second === null || typeof second !== "object") return undefined;
  if (second.remoteAddr !== undefined) return second.remoteAddr.hostname;
  if (typeof second.requestIP === "function") return second.requestIP(request)?.address;
  return undefined;
}

/**
 * Adds the rate-limit headers the response does not carry already: a header the handler set, or
 * an inner limiter's, wins, as it does on Node's responses (the middlewares write theirs before
 * the handler runs).
 */
export function withHeaders(response: Response, headers: readonly string[]): Response {
  let target = response;
  for (let i = 0; i < headers.length; i += 2) {
    if (target.headers.has(headers[i]!)) continue;
    try {
      target.headers.set(headers[i]!, headers[i + 1]!);
    } catch {
      // Immutable headers (a response from fetch()): copy once, then set.
      target = new Response(target.body, target);
      target.headers.set(headers[i]!, headers[i + 1]!);
    }
  }
  return target;
}

/**
 * Settles `result` once `response` has been sent: at once when it has no body (or the client is
 * gone already); else when its body has been read to the end (its status), or cancelled or
 * failed on the way (0: the client disconnected early), as Node's `close` before `finish` does.
 * Returns the response to send: `response`, or a copy whose body is watched.
 */
export function settleAfterBody(
  result: Pick<RateLimitResult, "settle">,
  response: Response,
  signal: AbortSignal | undefined,
): Response {
  const body = response.body;
  if (signal?.aborted || body === null) {
    result.settle(signal?.aborted ? 0 : response.status, response);
    return response;
  }
  const status = response.status;
  const reader = body.getReader();
  const stream = new ReadableStream<Uint8Array>({
    async pull(controller) {
      let chunk: ReadableStreamReadResult<Uint8Array>;
      try {
        chunk = await reader.read();
      } catch (error) {
        result.settle(0);
        throw error;
      }
      if (chunk.done) {
        result.settle(status, response);
        controller.close();
      } else {
        controller.enqueue(chunk.value);
      }
    },
    cancel(reason) {
      result.settle(0);
      return reader.cancel(reason);
    },
  });
  return new Response(stream, response);
}

/** The limited response as a fetch `Response`. */
export function toFetchResponse(result: RateLimitResult): Response {
  const limited = result.response!;
  const headers = new Headers();
  // `set`: a custom handler's header replaces Floodgate's own of that name, as on Node's responses.
  setHeaders(limited.headers, (name, value) => headers.set(name, value));
  return new Response(limited.body, { status: limited.status, headers });
}

/**
 * Wraps a fetch handler with rate limiting: limited requests get a 429 without reaching it;
 * others get rate-limit headers on its response, and the handler reads the decision with
 * {@link getRateLimit}`(request)`. Always answers with a promise, whatever the handler returns.
 * Options are validated once, here.
 *
 * @param handler - `(request, ...rest) => Response | Promise<Response>`
 * @param options - as the middlewares' options, plus `getClientIp`
 * @example
 * const handler = withRateLimit((request) => new Response("hello"), {
 *   policy: slidingWindow({ limit: 100, window: "1m" }),
 * });
 * Deno.serve(handler); // or Bun.serve({ fetch: handler }), export default { fetch: handler }
 */
export function withRateLimit<Rest extends unknown[]>(
  handler: FetchHandler<Rest>,
  options: WithRateLimitOptions<Rest>,
): RateLimitedFetchHandler<Rest> & RateLimitHandle {
  if (typeof handler !== "function") {
    // At construction (hence INVALID_OPTION), not a TypeError on every request.
    throw new FloodgateError(
      "INVALID_OPTION",
      `withRateLimit(): invalid argument \`handler\`: received ${
        describeValue(handler)
      }; expected a function (request, ...rest) => Response or a promise of one.`,
    );
  }
  const limiter = createHttpRateLimiter(options as HttpRateLimitOptions<Request>, FETCH_ACCESS, "getClientIp");
  const getClientIp = options.getClientIp ?? runtimeClientIp as (request: Request, ...rest: Rest) => string | undefined;
  return withHandle(async function rateLimitedFetch(request: Request, ...passed: [...Rest, ...unknown[]]): Promise<Response> {
    const args = passed as unknown as Rest;
    const result = await limiter.decide(request, getClientIp(request, ...args));
    if (result === undefined) return handler(request, ...args);
    // What is left after the response, to the platform's waitUntil: Workers' ctx (the third
    // argument), Netlify's context (the second), or Vercel's request context.
    handOffPending(result, () => args);
    if (!result.allowed) return toFetchResponse(result);
    DECISIONS.set(request, result.info);
    let response: Response;
    try {
      response = await handler(request, ...args);
    } catch (error) {
      result.settle(HANDLER_THREW);
      throw error;
    }
    // A client that went away before the response was sent counts as failed (status 0), as on Node's `close`.
    // A response to HEAD sends no body (Bun cancels it): settled at once, as a null body is.
    if (result.settles) {
      if (request.method === "HEAD") result.settle(request.signal?.aborted ? 0 : response.status, response);
      else response = settleAfterBody(result, response, request.signal);
    }
    return result.headers.length === 0 ? response : withHeaders(response, result.headers);
  }, limiter);
}
