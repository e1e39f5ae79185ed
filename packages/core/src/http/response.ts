import type { Decision } from "../limiter/index.ts";
import type { Policy } from "../policy.ts";
import { retryAfterSeconds } from "./headers.ts";
import type { HttpRateLimitOptions, MaybePromise, RateLimitRequest } from "./options.ts";
import type { PreparedResponse, RateLimitInfo } from "./info.ts";
import type { RateLimitResult } from "./result.ts";

// The response to a limited request: the default JSON or problem+json (RFC 9457) body, or the
// user's `handler`, with the rate-limit headers and Retry-After.

export type { PreparedResponse } from "./info.ts";

/** Builds the response of a limited request from its info and headers (Retry-After included). */
export type Responder<Raw> = (
  req: RateLimitRequest<Raw>,
  info: RateLimitInfo,
  headers: readonly string[],
  retryAfter: number,
) => MaybePromise<PreparedResponse>;

const JSON_TYPE = "application/json; charset=utf-8";
const TEXT_TYPE = "text/plain; charset=utf-8";
/** The default body's message (and Koa's `throw: true` error message when `message` is not a string). */
export const DEFAULT_MESSAGE = "Too many requests. Please retry after the Retry-After period.";

/** The answer to a request the `denyList` refuses: 403, nothing counted, no rate-limit headers. */
export const REFUSED_RESPONSE: PreparedResponse = Object.freeze({
  status: 403,
  headers: Object.freeze(["Content-Type", JSON_TYPE]),
  body: '{"error":{"code":"FORBIDDEN","message":"Access denied."}}',
});

/**
 * Whole seconds a limited client should wait: the decision's, or, for a "deny" after a store
 * failure (no figures), the open circuit's remaining cool-down, at least one second.
 */
export function limitedRetryAfter(
  decision: Decision | undefined,
  policies: readonly Policy[],
  circuitOpenMs: number,
  nowMs: number,
): number {
  return decision === undefined ? Math.max(1, Math.ceil(circuitOpenMs / 1000)) : retryAfterSeconds(decision, policies, nowMs);
}

/** The responder the options describe; everything but the Retry-After seconds is known now. */
export function createResponder<Raw>(o: HttpRateLimitOptions<Raw>): Responder<Raw> {
  const status = o.statusCode ?? 429;
  const handler = o.handler;
  if (handler !== undefined) {
    const prepare = (custom: Awaited<ReturnType<typeof handler>>, headers: readonly string[]): PreparedResponse => {
      const out = [...headers];
      let type: string | undefined;
      for (const [name, value] of Object.entries(custom?.headers ?? {})) {
        if (name.toLowerCase() === "content-type") type = value;
        out.push(name, value);
      }
      const body = custom?.body;
      const text = body === undefined || body === null ? null : typeof body === "string" ? body : JSON.stringify(body);
      if (type === undefined && text !== null) out.push("Content-Type", typeof body === "string" ? TEXT_TYPE : JSON_TYPE);
      return { status: custom?.status ?? status, headers: out, body: text };
    };
    return async (req, info, headers) => prepare(await handler(req, info), headers);
  }
  if (typeof o.message === "object") {
    const body = JSON.stringify(o.message);
    return (_req, _info, headers) => ({ status, headers: [...headers, "Content-Type", JSON_TYPE], body });
  }
  const message = JSON.stringify(o.message ?? DEFAULT_MESSAGE);
  const problem = o.format === "problem+json";
  const contentType = problem ? "application/problem+json" : JSON_TYPE;
  const head = problem
    ? `{"type":"about:blank","title":"Too Many Requests","status":${status},"detail":${message},"retryAfter":`
    : `{"error":{"code":"RATE_LIMITED","message":${message},"retryAfter":`;
  const tail = problem ? "}" : "}}";
  return (_req, _info, headers, retryAfter) => ({
    status,
    headers: [...headers, "Content-Type", contentType],
    body: `${head}${retryAfter}${tail}`,
  });
}

/**
 * A limited (or `denyList`-refused) request as an error for the framework's error handling to
 * render (Koa's `throw: true`): its status, a message, every response header but Content-Type
 * (the rate-limit headers and Retry-After), and the decision.
 */
export interface RateLimitError {
  /** 429 (or `statusCode`); 403 for a `denyList` refusal. */
  readonly status: number;
  /** `message` when it is a string, else the default body's message; "Access denied." for a refusal. */
  readonly message: string;
  /** The headers to send with whatever the error handler renders. */
  readonly headers: Record<string, string>;
  /** Floodgate's decision. */
  readonly rateLimit: RateLimitInfo;
}

/** The error an adapter throws for a request `result` did not allow (see {@link RateLimitError}). */
export function rateLimitError(result: RateLimitResult, message: HttpRateLimitOptions["message"]): RateLimitError {
  const denied = result.response!;
  const headers: Record<string, string> = {};
  for (let i = 0; i < denied.headers.length; i += 2) {
    if (denied.headers[i]!.toLowerCase() !== "content-type") headers[denied.headers[i]!] = denied.headers[i + 1]!;
  }
  const text = denied.status === 403 && result.info.source === "denyList"
    ? "Access denied."
    : typeof message === "string"
    ? message
    : DEFAULT_MESSAGE;
  return { status: denied.status, message: text, headers, rateLimit: result.info };
}
