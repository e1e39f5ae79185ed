import type { RequestAccess } from "@floodgate/core/http";

// The HTTP events Lambda receives, as far as the rate limiter reads them. Structural types: the
// events of `@types/aws-lambda` (APIGatewayProxyEvent, APIGatewayProxyEventV2,
// LambdaFunctionURLEvent, ALBEvent) are assignable to them, and no package is needed at run time.

type Values = { readonly [name: string]: string | undefined } | null | undefined;
type MultiValues = { readonly [name: string]: readonly string[] | undefined } | null | undefined;

/** An API Gateway REST API event (proxy integration, payload format 1.0). */
export interface RestApiEvent {
  /** The request's method. */
  readonly httpMethod: string;
  /** The path, without the stage (with a custom domain's base path, if one is mapped). */
  readonly path: string;
  /** The headers, the last value of each. */
  readonly headers: Values;
  /** The headers, every value of each. */
  readonly multiValueHeaders?: MultiValues;
  /** The query string's parameters, the last value of each. */
  readonly queryStringParameters?: Values;
  /** The query string's parameters, every value of each. */
  readonly multiValueQueryStringParameters?: MultiValues;
  /** What API Gateway knows of the request. */
  readonly requestContext: {
    /** The caller as API Gateway saw it. */
    readonly identity: {
      /** The address that connected to API Gateway. */
      readonly sourceIp: string;
    };
  };
}

/** An API Gateway HTTP API event (payload format 2.0), or a Lambda Function URL event (the same format). */
export interface HttpApiEvent {
  /** The path as requested (with the stage, unless it is `$default`). */
  readonly rawPath: string;
  /** The query string, undecoded, without `?`. */
  readonly rawQueryString?: string;
  /** The headers, lower-case, repeated values joined with commas (cookies apart). */
  readonly headers?: Values;
  /** The `Cookie` header's cookies. */
  readonly cookies?: readonly string[];
  /** What API Gateway (or the Function URL) knows of the request. */
  readonly requestContext: {
    /** The stage (`$default` for Function URLs and the default stage). */
    readonly stage?: string;
    /** The request line and the caller. */
    readonly http: {
      /** The request's method. */
      readonly method: string;
      /** The address that connected. */
      readonly sourceIp: string;
    };
  };
}

/** An Application Load Balancer event (a Lambda target group, with or without multi-value headers). */
export interface AlbEvent {
  /** The request's method. */
  readonly httpMethod: string;
  /** The path as requested. */
  readonly path: string;
  /** The headers, lower-case (absent when multi-value headers are on). */
  readonly headers?: Values;
  /** The headers, every value of each (present only when multi-value headers are on). */
  readonly multiValueHeaders?: MultiValues;
  /** The query string's parameters, percent-encoded as sent. */
  readonly queryStringParameters?: Values;
  /** The same, every value of each (multi-value headers on). */
  readonly multiValueQueryStringParameters?: MultiValues;
  /** Names the target group. */
  readonly requestContext: {
    /** The load balancer's target group. */
    readonly elb: {
      /** The target group's ARN. */
      readonly targetGroupArn: string;
    };
  };
}

/** Any HTTP event the wrapper serves. */
export type LambdaHttpEvent = RestApiEvent | HttpApiEvent | AlbEvent;

/** Which of the shapes an event is. */
export type EventShape = "rest" | "http" | "alb";

export function shapeOf(event: LambdaHttpEvent): EventShape {
  const context = (event as { requestContext?: { elb?: unknown; http?: unknown } }).requestContext;
  if (context?.elb !== undefined) return "alb";
  return context?.http !== undefined ? "http" : "rest";
}

/** Whether the event carries its headers as lists, so that a response to it must too (ALB with multi-value headers on, REST). */
export function usesMultiValue(event: LambdaHttpEvent): boolean {
  return (event as RestApiEvent).multiValueHeaders != null;
}

/** What is read of one event, once: its headers by lower-case name and the client address. */
interface Facts {
  readonly headers: Map<string, string>;
  readonly peer: string | undefined;
}

const FACTS = new WeakMap<object, Facts>();

function factsOf(event: LambdaHttpEvent): Facts {
  let facts = FACTS.get(event);
  if (facts === undefined) {
    facts = readFacts(event);
    FACTS.set(event, facts);
  }
  return facts;
}

function readFacts(event: LambdaHttpEvent): Facts {
  const headers = new Map<string, string>();
  const multi = (event as RestApiEvent).multiValueHeaders;
  if (multi != null) {
    for (const name in multi) {
      const values = multi[name];
      if (values === undefined || values.length === 0) continue;
      const key = name.toLowerCase();
      const joined = values.join(", ");
      const before = headers.get(key);
      headers.set(key, before === undefined ? joined : `${before}, ${joined}`);
    }
  } else {
    const single = (event as HttpApiEvent).headers;
    for (const name in single ?? {}) {
      const value = single![name];
      if (value === undefined) continue;
      const key = name.toLowerCase();
      const before = headers.get(key);
      headers.set(key, before === undefined ? value : `${before}, ${value}`);
    }
  }
  const shape = shapeOf(event);
  // Payload 2.0 moves the Cookie header into `cookies`.
  const cookies = (event as HttpApiEvent).cookies;
  if (shape === "http" && cookies !== undefined && cookies.length > 0 && !headers.has("cookie")) headers.set("cookie", cookies.join("; "));

  // The front door's own record of the peer leaves X-Forwarded-For: what remains is the chain
  // it received, read through `trustProxy` with the peer as the socket address, as on a server.
  let peer: string | undefined;
  const forwarded = headers.get("x-forwarded-for");
  const chain = forwarded === undefined ? [] : forwarded.split(",").map((s) => s.trim());
  if (shape === "alb") {
    // ALB appends the address that connected to it, last (the default `append` mode).
    peer = chain.pop() || undefined;
  } else {
    peer = shape === "http"
      ? (event as HttpApiEvent).requestContext.http.sourceIp
      : (event as RestApiEvent).requestContext.identity?.sourceIp;
    // API Gateway appends the source address too (then, for an edge-optimized API, its CloudFront hop).
    const at = peer === undefined ? -1 : chain.lastIndexOf(peer);
    if (at !== -1) chain.length = at;
  }
  if (forwarded !== undefined) {
    if (chain.length === 0) headers.delete("x-forwarded-for");
    else headers.set("x-forwarded-for", chain.join(", "));
  }
  return { headers, peer };
}

/** The address that connected to the front door: API Gateway's or the Function URL's source IP, or the one ALB appended. */
export function peerOf(event: LambdaHttpEvent): string | undefined {
  return factsOf(event).peer;
}

/**
 * The path the application routes: the event's, without the stage of a payload-2.0 API on a
 * named stage, and without `basePath` (a custom domain's API mapping) when it starts with it.
 */
export function pathOf(event: LambdaHttpEvent, basePath: string): string {
  let path: string;
  if (shapeOf(event) === "http") {
    const e = event as HttpApiEvent;
    path = e.rawPath;
    const stage = e.requestContext.stage;
    if (stage !== undefined && stage !== "$default" && (path === `/${stage}` || path.startsWith(`/${stage}/`))) {
      path = path.slice(stage.length + 1);
    }
  } else {
    path = (event as RestApiEvent).path;
  }
  if (basePath !== "" && (path === basePath || path.startsWith(`${basePath}/`))) path = path.slice(basePath.length);
  return path === "" ? "/" : path;
}

/** How the HTTP limiter reads an event. */
export function eventAccess(basePath: string): RequestAccess<LambdaHttpEvent> {
  return {
    method: (event) => shapeOf(event) === "http" ? (event as HttpApiEvent).requestContext.http.method : (event as RestApiEvent).httpMethod,
    path: (event) => pathOf(event, basePath),
    header: (event, name) => factsOf(event).headers.get(name),
  };
}

/**
 * A query-string parameter of the event, decoded, whatever its shape: the first value of a
 * repeated one; `undefined` when absent. For `key` and `cost` functions: `queryParameter(req.raw, "api_key")`.
 */
export function queryParameter(event: LambdaHttpEvent, name: string): string | undefined {
  const shape = shapeOf(event);
  if (shape === "http") {
    const raw = (event as HttpApiEvent).rawQueryString;
    return raw ? new URLSearchParams(raw).get(name) ?? undefined : undefined;
  }
  const e = event as RestApiEvent | AlbEvent;
  // ALB passes parameters as sent (percent-encoded, names too); API Gateway decodes them.
  const decode = shape === "alb" ? (s: string) => decodeQuery(s) : (s: string) => s;
  const multi = e.multiValueQueryStringParameters;
  const single = e.queryStringParameters;
  for (const [key, value] of Object.entries(multi ?? single ?? {})) {
    if (decode(key) !== name || value === undefined) continue;
    const first = Array.isArray(value) ? value[0] : value;
    return first === undefined ? undefined : decode(first as string);
  }
  return undefined;
}

function decodeQuery(text: string): string {
  try {
    return decodeURIComponent(text.replace(/\+/g, " "));
  } catch {
    return text;
  }
}
