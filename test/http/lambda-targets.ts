// The Lambda shapes as targets of the scenario table: each request becomes the event its front
// door would deliver (derived from the events AWS documents, test/aws-lambda/fixtures), with the
// source address 127.0.0.1 appended to X-Forwarded-For as API Gateway and ALB do; the result
// becomes the response the front door would send, read as it reads it (payload 2.0 infers a
// result without statusCode; ALB with multi-value headers reads only those, without them only
// `headers`). The function wraps /api paths and answers others itself.
import { getRateLimit, type LambdaHttpEvent, type LambdaHttpResult, withRateLimit } from "@floodgate/aws-lambda";
import type { HttpRateLimitOptions } from "@floodgate/core";
import type { ALBEvent, APIGatewayProxyEvent } from "aws-lambda";
import { ALB_EVENT, ALB_MULTI_VALUE_EVENT, FUNCTION_URL_EVENT, HTTP_API_EVENT, REST_API_EVENT } from "../aws-lambda/fixtures/events.ts";
import type { Reply, SendOptions, Target } from "./targets.ts";

/** The address every target's client connects from. */
const SOURCE_IP = "127.0.0.1";

export type Shape = "rest" | "http" | "url" | "alb" | "alb-multi";

interface Request {
  method: string;
  path: string;
  query: [string, string][];
  headers: [string, string][];
}

function requestOf(target: string, { method = "GET", headers = {}, status }: SendOptions = {}): Request {
  const url = new URL(target, "http://localhost");
  const all: [string, string][] = Object.entries({ ...headers, ...(status === undefined ? {} : { "x-test-status": String(status) }) });
  // The front door appends the address that connected to it.
  const forwarded = all.find(([name]) => name.toLowerCase() === "x-forwarded-for");
  if (forwarded !== undefined) forwarded[1] = `${forwarded[1]}, ${SOURCE_IP}`;
  else all.push(["x-forwarded-for", SOURCE_IP]);
  all.push(["x-forwarded-proto", "https"]);
  return { method, path: url.pathname, query: [...url.searchParams], headers: all };
}

const grouped = (pairs: [string, string][], lower: boolean): Record<string, string[]> => {
  const out: Record<string, string[]> = {};
  for (const [name, value] of pairs) (out[lower ? name.toLowerCase() : name] ??= []).push(value);
  return out;
};
const lastOf = (groups: Record<string, string[]>): Record<string, string> =>
  Object.fromEntries(Object.entries(groups).map(([k, v]) => [k, v[v.length - 1]!]));

/** The event the front door of `shape` delivers for `request`. */
export function eventFor(shape: Shape, request: Request): LambdaHttpEvent {
  const { method, path, query, headers } = request;
  if (shape === "rest") {
    const multiHeaders = grouped(headers, false);
    const multiQuery = grouped(query, false);
    const event: APIGatewayProxyEvent = {
      ...REST_API_EVENT,
      resource: "/{proxy+}",
      path,
      httpMethod: method,
      headers: lastOf(multiHeaders),
      multiValueHeaders: multiHeaders,
      queryStringParameters: query.length === 0 ? null : lastOf(multiQuery),
      multiValueQueryStringParameters: query.length === 0 ? null : multiQuery,
      requestContext: {
        ...REST_API_EVENT.requestContext,
        httpMethod: method,
        path: `/prod${path}`,
        stage: "prod",
        identity: { ...REST_API_EVENT.requestContext.identity, sourceIp: SOURCE_IP },
      },
      body: null,
    };
    return event;
  }
  if (shape === "http" || shape === "url") {
    const base = shape === "http" ? HTTP_API_EVENT : FUNCTION_URL_EVENT;
    // A named stage on the HTTP API (its name leads rawPath); Function URLs have only $default.
    const stage = shape === "http" ? "prod" : "$default";
    const rawPath = shape === "http" ? `/${stage}${path}` : path;
    const cookies = headers.filter(([n]) => n.toLowerCase() === "cookie").flatMap(([, v]) => v.split(/;\s*/));
    const joined = Object.fromEntries(
      Object.entries(grouped(headers.filter(([n]) => n.toLowerCase() !== "cookie"), true)).map(([k, v]) => [k, v.join(",")]),
    );
    return {
      ...base,
      rawPath,
      rawQueryString: new URLSearchParams(query).toString(),
      cookies: cookies.length === 0 ? undefined : cookies,
      headers: joined,
      queryStringParameters: query.length === 0
        ? undefined
        : Object.fromEntries(Object.entries(grouped(query, false)).map(([k, v]) => [k, v.join(",")])),
      requestContext: { ...base.requestContext, stage, http: { ...base.requestContext.http, method, path: rawPath, sourceIp: SOURCE_IP } },
      body: undefined,
    } as LambdaHttpEvent;
  }
  // ALB passes the query string as sent: percent-encoded.
  const encoded = query.map(([k, v]): [string, string] => [encodeURIComponent(k), encodeURIComponent(v)]);
  if (shape === "alb") {
    const event: ALBEvent = {
      ...ALB_EVENT,
      httpMethod: method,
      path,
      headers: Object.fromEntries(Object.entries(grouped(headers, true)).map(([k, v]) => [k, v[v.length - 1]!])),
      queryStringParameters: lastOf(grouped(encoded, false)),
      body: "",
    };
    return event;
  }
  const event: ALBEvent = {
    ...ALB_MULTI_VALUE_EVENT,
    httpMethod: method,
    path,
    multiValueHeaders: grouped(headers, true),
    multiValueQueryStringParameters: grouped(encoded, false),
    body: "",
  };
  return event;
}

/** The response the front door of `shape` sends for the function's `result`. */
export function replyFor(shape: Shape, method: string, result: unknown): Reply {
  let r = result as LambdaHttpResult;
  if ((shape === "http" || shape === "url") && (typeof result !== "object" || result === null || r.statusCode === undefined)) {
    r = {
      statusCode: 200,
      headers: { "content-type": "application/json" },
      body: typeof result === "string" ? result : JSON.stringify(result),
    };
  }
  if (typeof r?.statusCode !== "number") return { status: 502, headers: new Headers(), body: "" };
  const headers = new Headers();
  const single = shape === "alb-multi" ? undefined : r.headers;
  const multi = shape === "alb" || shape === "http" || shape === "url" ? undefined : r.multiValueHeaders;
  for (const [name, value] of Object.entries(single ?? {})) if (value !== undefined) headers.set(name, String(value));
  // API Gateway merges both maps, the multi-value one winning a name in both.
  for (const [name, values] of Object.entries(multi ?? {})) {
    headers.delete(name);
    for (const value of values ?? []) headers.append(name, String(value));
  }
  for (const cookie of r.cookies ?? []) headers.append("set-cookie", cookie);
  const text = r.body === undefined ? "" : r.isBase64Encoded ? Buffer.from(r.body, "base64").toString() : r.body;
  return { status: r.statusCode, headers, body: method === "HEAD" ? "" : text };
}

const statusOf = (value: string | undefined): number => (value === undefined ? 200 : Number(value));

function lambdaTarget(shape: Shape, name: string): Target {
  return {
    name,
    async start(options) {
      const api = withRateLimit((event: LambdaHttpEvent) => {
        const status = requestHeader(event, "x-test-status");
        const body = { rateLimit: getRateLimit(event) ?? null };
        // Payload 2.0 accepts a bare object for a 200: the wrapper must find its headers a place.
        if ((shape === "http" || shape === "url") && status === undefined) return body as unknown as LambdaHttpResult;
        return { statusCode: statusOf(status), headers: { "content-type": "application/json" }, body: JSON.stringify(body) };
      }, options as HttpRateLimitOptions<LambdaHttpEvent>);
      const outside = (): LambdaHttpResult => ({ statusCode: 200, body: "outside" });
      return {
        handle: api,
        async send(path, opts) {
          const request = requestOf(path, opts);
          const event = eventFor(shape, request);
          const result = request.path.startsWith("/api/") ? await api(event, {}) : outside();
          return replyFor(shape, request.method, result);
        },
        close: async () => {},
      };
    },
  };
}

/** A header of the event as the function sees it (for the test route's `x-test-status`). */
function requestHeader(event: LambdaHttpEvent, name: string): string | undefined {
  const e = event as {
    headers?: Record<string, string | undefined> | null;
    multiValueHeaders?: Record<string, string[] | undefined> | null;
  };
  for (const [key, value] of Object.entries(e.headers ?? {})) if (key.toLowerCase() === name) return value;
  for (const [key, value] of Object.entries(e.multiValueHeaders ?? {})) if (key.toLowerCase() === name) return value?.[0];
  return undefined;
}

export const LAMBDA_TARGETS: readonly Target[] = [
  lambdaTarget("rest", "lambda: API Gateway REST (1.0)"),
  lambdaTarget("http", "lambda: API Gateway HTTP API (2.0, named stage)"),
  lambdaTarget("url", "lambda: Function URL"),
  lambdaTarget("alb", "lambda: ALB"),
  lambdaTarget("alb-multi", "lambda: ALB, multi-value headers"),
];
