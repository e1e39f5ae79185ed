// A Fastify adapter written outside Floodgate, on `@floodgate/core/http` alone: the same
// translation the Hono, Express and Koa adapters make. Fastify's request and reply in, Floodgate's
// decision out.
import {
  createHttpRateLimiter,
  type HttpRateLimitOptions,
  type RateLimitInfo,
  type RequestAccess,
  settleOnClose,
  targetPath,
} from "@floodgate/core/http";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";

/** Options of {@link addRateLimit}: the shared HTTP options, with Fastify's request as `raw`. */
export type FastifyRateLimitOptions = HttpRateLimitOptions<FastifyRequest>;

declare module "fastify" {
  interface FastifyRequest {
    /** Floodgate's decision; absent when the request was skipped or allow-listed. */
    rateLimit?: RateLimitInfo;
  }
}

const ACCESS: RequestAccess<FastifyRequest> = {
  method: (request) => request.method,
  // `request.url` is the raw request-target, query string included.
  path: (request) => targetPath(request.url),
  header: (request, name) => {
    const value = request.headers[name];
    return Array.isArray(value) ? value.join(", ") : value;
  },
};

/**
 * Rate-limits every route of `app` (an `onRequest` hook on the root instance, so no plugin
 * encapsulation hides it). Options are validated here, once; the decision is `request.rateLimit`.
 *
 * @example
 * addRateLimit(app, { policy: slidingWindow({ limit: 100, window: "1m" }) });
 */
export function addRateLimit(app: FastifyInstance, options: FastifyRateLimitOptions): void {
  const limiter = createHttpRateLimiter(options, ACCESS);
  app.decorateRequest("rateLimit", undefined);
  app.addHook("onRequest", async (request: FastifyRequest, reply: FastifyReply) => {
    // The socket's peer: Floodgate's own `trustProxy` option resolves proxies, not Fastify's.
    const result = await limiter.decideRequest(request, request.raw.socket.remoteAddress);
    if (result === undefined) return;
    request.rateLimit = result.info;
    if (!result.allowed) {
      const limited = result.response!;
      reply.code(limited.status);
      for (let i = 0; i < limited.headers.length; i += 2) reply.header(limited.headers[i]!, limited.headers[i + 1]!);
      return reply.send(limited.body ?? "");
    }
    const headers = result.headers;
    for (let i = 0; i < headers.length; i += 2) reply.header(headers[i]!, headers[i + 1]!);
    // Refunds (skipSuccessfulRequests / skipFailedRequests) see the status Node finally sent.
    settleOnClose(result, reply.raw);
  });
}
