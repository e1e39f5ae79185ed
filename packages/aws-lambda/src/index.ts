/**
 * Floodgate rate limiting for AWS Lambda HTTP handlers (API Gateway REST and HTTP APIs, Function
 * URLs, Application Load Balancer): a translation layer over `@floodgate/core/http`.
 *
 * @module @floodgate/aws-lambda
 */
import {
  createHttpRateLimiter,
  FloodgateError,
  type HttpRateLimitOptions,
  type RateLimitHandle,
  type RateLimitInfo,
  withHandle,
} from "@floodgate/core/http";
import { eventAccess, type LambdaHttpEvent, peerOf, shapeOf } from "./events.ts";
import { deniedResult, endedView, structured, withHeaders } from "./results.ts";

export type { AlbEvent, HttpApiEvent, LambdaHttpEvent, RestApiEvent } from "./events.ts";
export { queryParameter } from "./events.ts";
export type { LambdaHttpResult } from "./results.ts";

/** An async (or plain) Lambda handler of HTTP events. `Ctx` is Lambda's `Context`. */
export type LambdaHttpHandler<E extends LambdaHttpEvent, R, Ctx = unknown> = (event: E, context: Ctx) => R | Promise<R>;

/** What {@link withRateLimit} returns: the handler, always answering with a promise. */
export type RateLimitedLambdaHandler<E extends LambdaHttpEvent, R, Ctx = unknown> = (event: E, context: Ctx) => Promise<R>;

/** Options of {@link withRateLimit}: the shared HTTP options, plus where the path and the client address come from. */
export interface LambdaRateLimitOptions<E extends LambdaHttpEvent = LambdaHttpEvent, Ctx = unknown> extends HttpRateLimitOptions<E> {
  /**
   * A custom domain's API mapping (`"/v1"`), removed from the front of paths before rules see
   * them, as the stage of a payload-2.0 API is. Default none.
   */
  basePath?: string;
  /**
   * The address that connected, when it is not where the event says (default: API Gateway's and
   * the Function URL's `sourceIp`; for ALB, the last X-Forwarded-For entry, which ALB appends).
   * `trustProxy` then reads proxies in front of it from the rest of X-Forwarded-For.
   */
  getClientIp?: (event: E, context: Ctx) => string | undefined;
}

/** The decision of each event the wrapper passed on, for {@link getRateLimit}. */
const DECISIONS = new WeakMap<object, RateLimitInfo>();

/**
 * The rate-limit decision for `event` inside a handler wrapped by {@link withRateLimit}
 * (`limit`, `remaining`, `resetAt`, `key`, `rule`, `report()`...); `undefined` when the request
 * was not limited (skipped, allow-listed, no rule applies, cost 0).
 */
export function getRateLimit(event: LambdaHttpEvent): RateLimitInfo | undefined {
  return DECISIONS.get(event);
}

function invalid(message: string): FloodgateError {
  return new FloodgateError("INVALID_OPTION", message);
}

/**
 * Wraps a Lambda handler of HTTP events with rate limiting. A limited request gets a 429 (a
 * deny-listed one a 403) in the event's own response shape without reaching the handler; others
 * get the rate-limit headers added to the handler's result. Settlements, releases, refunds and
 * hooks' promises finish before the wrapper returns (a function is frozen once it has answered),
 * so build the limiter at module scope: its options are validated once, and a warm instance
 * keeps its counters' connections and its leases.
 *
 * @example
 * export const handler = withRateLimit(async (event) => ({ statusCode: 200, body: "hello" }), {
 *   policy: slidingWindow({ limit: 100, window: "1m" }),
 *   store: dynamoDBStore({ client: new DynamoDBClient({}), table: "rate-limits" }),
 * });
 */
export function withRateLimit<E extends LambdaHttpEvent, R, Ctx = unknown>(
  handler: LambdaHttpHandler<E, R, Ctx>,
  options: LambdaRateLimitOptions<E, Ctx>,
): RateLimitedLambdaHandler<E, R, Ctx> & RateLimitHandle {
  if (typeof handler !== "function") {
    throw invalid("withRateLimit() (@floodgate/aws-lambda): invalid argument `handler`: expected a function (event, context) => result.");
  }
  const { basePath = "", ...shared } = (options ?? {}) as LambdaRateLimitOptions<E, Ctx>;
  if (typeof basePath !== "string" || (basePath !== "" && (!basePath.startsWith("/") || basePath.endsWith("/")))) {
    throw invalid(
      `withRateLimit() (@floodgate/aws-lambda): invalid option \`basePath\`: received ${
        JSON.stringify(basePath)
      }; expected a path such as "/v1" (starting with "/", not ending with one).`,
    );
  }
  const limiter = createHttpRateLimiter(shared as HttpRateLimitOptions<LambdaHttpEvent>, eventAccess(basePath), "getClientIp");
  const getClientIp = shared.getClientIp;
  return withHandle(async function rateLimitedHandler(event: E, context: Ctx): Promise<R> {
    const peer = getClientIp === undefined ? peerOf(event) : getClientIp(event, context);
    const result = await limiter.decide(event, peer);
    if (result === undefined) return handler(event, context);
    try {
      if (!result.allowed) return deniedResult(event, result.response!) as R;
      DECISIONS.set(event, result.info);
      let returned: R;
      try {
        returned = await handler(event, context);
      } catch (error) {
        result.settle(500); // the front door answers 502 for a failed invocation: a failure all the same
        throw error;
      }
      const shape = shapeOf(event);
      const answer = structured(shape, returned);
      if (answer === undefined) {
        result.settle(502);
        return returned;
      }
      // A buffered response is sent whole once the handler returns: it ends with its status.
      if (result.settles) result.settle(answer.statusCode!, endedView(answer));
      return (result.headers.length === 0 ? (answer === returned ? returned : answer) : withHeaders(event, answer, result.headers)) as R;
    } finally {
      // Lambda freezes the instance once the handler has answered: what is left to do is done first.
      await result.info.pending;
    }
  }, limiter);
}

export type { HandleOptions, RateLimitHandle, RateLimitInfo } from "@floodgate/core/http";
