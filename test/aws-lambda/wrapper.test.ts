/**
 * What the Lambda wrapper reads of each documented event and answers in each shape, beyond the
 * scenario table (test/http/scenarios.test.ts runs every shape through it): client addresses,
 * stages and base paths, query parameters, cookies, response shapes, results it must infer or
 * leave alone, settlement with the result's headers, and work finished before it returns.
 */
import { getRateLimit, type LambdaHttpEvent, queryParameter, withRateLimit } from "@floodgate/aws-lambda";
import { fixedWindow, FloodgateError, type RateLimitInfo } from "@floodgate/core";
import type { APIGatewayProxyEventV2 } from "aws-lambda";
import { describe, expect, it } from "vitest";
import { ALB_EVENT, ALB_MULTI_VALUE_EVENT, FUNCTION_URL_EVENT, HTTP_API_EVENT, REST_API_EVENT } from "./fixtures/events.ts";

const once = { policy: fixedWindow({ limit: 1, window: "1h" }), warnings: false as const, clock: () => 1_700_002_800_000 };
const ok = async () => ({ statusCode: 200, body: "ok" });

/** Decisions seen by onDecision, for a wrapper made with these options. */
function recorded(options: object = {}) {
  const decisions: RateLimitInfo[] = [];
  const paths: string[] = [];
  const handler = withRateLimit(ok, {
    ...once,
    ...options,
    onDecision: (info, req) => {
      decisions.push(info);
      paths.push(`${req.method} ${req.path} ${req.ip}`);
    },
  });
  return { handler, decisions, paths };
}

describe("reading the documented events", () => {
  it.each([
    ["REST API", REST_API_EVENT, "GET /my/path 192.0.2.1"],
    ["HTTP API", HTTP_API_EVENT, "POST /my/path 192.0.2.1"],
    ["Function URL", FUNCTION_URL_EVENT, "POST /my/path 123.123.123.123"],
    ["ALB", ALB_EVENT, "GET / 72.21.198.66"],
    ["ALB, multi-value headers", ALB_MULTI_VALUE_EVENT, "GET / 72.21.198.66"],
  ] as [string, LambdaHttpEvent, string][])("%s: method, path and the client address", async (_name, event, expected) => {
    const { handler, paths, decisions } = recorded();
    await handler(event, {});
    expect(paths).toEqual([expected]);
    expect(decisions[0]!.key).toBe(expected.split(" ")[2]);
  });

  it("headers by any case, multi-value ones joined; payload 2.0 cookies as the Cookie header", async () => {
    const seen: (string | undefined)[] = [];
    const handler = withRateLimit(ok, {
      ...once,
      key: (req) => {
        seen.push(req.header("header2"), req.header("cookie"));
        return "k";
      },
    });
    await handler(REST_API_EVENT, {});
    await handler(HTTP_API_EVENT, {});
    await handler(ALB_MULTI_VALUE_EVENT, {});
    expect(seen).toEqual(["value1, value2", undefined, "value1,value2", "cookie1; cookie2", undefined, "name1=value1, name2=value2"]);
  });

  it("a named stage leads rawPath in payload 2.0 and is removed; basePath removes a custom domain's mapping", async () => {
    const staged: APIGatewayProxyEventV2 = {
      ...HTTP_API_EVENT,
      rawPath: "/prod/v1/items",
      requestContext: { ...HTTP_API_EVENT.requestContext, stage: "prod" },
    };
    const { handler, paths } = recorded({ basePath: "/v1" });
    await handler(staged, {});
    await handler({ ...REST_API_EVENT, path: "/v1" }, {});
    await handler({ ...REST_API_EVENT, path: "/v10/x" }, {});
    expect(paths.map((p) => p.split(" ")[1])).toEqual(["/items", "/", "/v10/x"]);
    expect(() => withRateLimit(ok, { ...once, basePath: "v1/" })).toThrow("invalid option `basePath`");
  });

  it("a bad handler or basePath is a FloodgateError with code INVALID_OPTION, as every other option error", () => {
    for (const build of [() => withRateLimit(ok, { ...once, basePath: "v1/" }), () => withRateLimit("x" as never, once)]) {
      let thrown: unknown;
      try {
        build();
      } catch (error) {
        thrown = error;
      }
      expect(thrown).toBeInstanceOf(FloodgateError);
      expect((thrown as FloodgateError).code).toBe("INVALID_OPTION");
    }
  });

  it("X-Forwarded-For: the front door's own entries are not a proxy chain; trustProxy reads the hops before them", async () => {
    // The header as the front door delivers it: in each map the event carries (REST carries both).
    const withChain = (event: LambdaHttpEvent, chain: string): LambdaHttpEvent => {
      const e = event as { headers?: object | null; multiValueHeaders?: object | null };
      return {
        ...event,
        ...(e.headers == null ? {} : { headers: { ...e.headers, "x-forwarded-for": chain } }),
        ...(e.multiValueHeaders == null ? {} : { multiValueHeaders: { ...e.multiValueHeaders, "x-forwarded-for": [chain] } }),
      } as LambdaHttpEvent;
    };
    const { handler, decisions } = recorded({ trustProxy: 1 });
    // An edge-optimized REST API: the client's entry, API Gateway's record of it, its CloudFront hop.
    await handler(withChain(REST_API_EVENT, "198.51.100.7, 192.0.2.1, 130.176.0.1"), {});
    await handler(withChain(HTTP_API_EVENT, "198.51.100.8, 192.0.2.1"), {});
    await handler(withChain(ALB_EVENT, "198.51.100.9, 72.21.198.66"), {});
    await handler(withChain(ALB_MULTI_VALUE_EVENT, "72.21.198.66"), {});
    expect(decisions.map((d) => d.key)).toEqual(["198.51.100.7", "198.51.100.8", "198.51.100.9", "72.21.198.66"]);
  });

  it("query parameters, decoded, from every shape", () => {
    expect(queryParameter(REST_API_EVENT, "parameter1")).toBe("value1");
    expect(queryParameter(HTTP_API_EVENT, "parameter1")).toBe("value1");
    expect(queryParameter(ALB_MULTI_VALUE_EVENT, "myKey")).toBe("val1");
    expect(queryParameter({ ...ALB_EVENT, queryStringParameters: { "api%20key": "a%2Bb+c" } }, "api key")).toBe("a+b c");
    expect(queryParameter(FUNCTION_URL_EVENT, "missing")).toBeUndefined();
  });
});

describe("answers", () => {
  it.each([
    ["REST API (multi-value headers, as its events carry)", REST_API_EVENT, "multi"],
    ["HTTP API", HTTP_API_EVENT, "single"],
    ["ALB", ALB_EVENT, "single"],
    ["ALB, multi-value headers", ALB_MULTI_VALUE_EVENT, "multi"],
  ] as [string, LambdaHttpEvent, string][])("a 429 in the event's shape: %s", async (_name, event, kind) => {
    const handler = withRateLimit(ok, once);
    await handler(event, {});
    const denied = await handler(event, {}) as Record<string, unknown>;
    expect(denied["statusCode"]).toBe(429);
    expect(denied["isBase64Encoded"]).toBe(false);
    expect(JSON.parse(denied["body"] as string)).toMatchObject({ error: { code: "RATE_LIMITED" } });
    if (kind === "multi") {
      expect(denied["headers"]).toBeUndefined();
      expect((denied["multiValueHeaders"] as Record<string, string[]>)["Retry-After"]).toEqual(["3600"]);
    } else {
      expect(denied["multiValueHeaders"]).toBeUndefined();
      expect((denied["headers"] as Record<string, string>)["Retry-After"]).toBe("3600");
    }
    if ("elb" in event.requestContext) expect(denied["statusDescription"]).toBe("429 Too Many Requests");
  });

  it("payload 2.0: a bare string or object is inferred as API Gateway does (200, JSON), so the headers fit", async () => {
    const handler = withRateLimit(async (event: APIGatewayProxyEventV2) => event.rawPath === "/s" ? "hello" : { message: "hi" }, {
      policy: fixedWindow({ limit: 5, window: "1h" }),
    });
    const asString = await handler({ ...HTTP_API_EVENT, rawPath: "/s" }, {}) as unknown as Record<string, unknown>;
    expect(asString).toMatchObject({ statusCode: 200, body: "hello", isBase64Encoded: false });
    expect((asString["headers"] as Record<string, string>)["X-RateLimit-Remaining"]).toBe("4");
    const asObject = await handler(HTTP_API_EVENT, {}) as unknown as Record<string, unknown>;
    expect(JSON.parse(asObject["body"] as string)).toEqual({ message: "hi" });
  });

  it("the handler's headers win, its base64 body stays base64, its result object is not changed", async () => {
    const result = { statusCode: 200, headers: { "x-ratelimit-limit": "mine" }, body: "aGk=", isBase64Encoded: true };
    const handler = withRateLimit(async () => result, { policy: fixedWindow({ limit: 5, window: "1h" }) });
    const answer = await handler(HTTP_API_EVENT, {}) as typeof result & { headers: Record<string, string> };
    expect(answer.headers["x-ratelimit-limit"]).toBe("mine");
    expect(answer.headers["X-RateLimit-Remaining"]).toBe("4");
    expect([answer.body, answer.isBase64Encoded]).toEqual(["aGk=", true]);
    expect(result.headers).toEqual({ "x-ratelimit-limit": "mine" });
  });

  it("a REST result without statusCode is passed on (API Gateway answers 502) and settles as a failure", async () => {
    const handler = withRateLimit(async () => undefined, { ...once, skipFailedRequests: true });
    expect(await handler(REST_API_EVENT, {})).toBeUndefined();
    expect(await handler(REST_API_EVENT, {})).toBeUndefined(); // the failure was given back
  });

  it("the deny list's 403 in the event's shape", async () => {
    const handler = withRateLimit(ok, { ...once, denyList: ["192.0.2.0/24"] });
    const refused = await handler(REST_API_EVENT, {}) as Record<string, unknown>;
    expect(refused["statusCode"]).toBe(403);
    expect(refused["multiValueHeaders"]).toBeDefined();
  });
});

describe("after the response", () => {
  it("a settled cost reads the result's headers; everything pending is done before the wrapper returns", async () => {
    let hookDone = false;
    const handler = withRateLimit(
      async (event: LambdaHttpEvent) => {
        expect(getRateLimit(event)?.remaining).toBe(6);
        return { statusCode: 200, multiValueHeaders: { "x-tokens": ["3"] }, body: "" };
      },
      {
        policy: fixedWindow({ limit: 10, window: "1h" }),
        cost: { estimate: 4, actual: (_req, res) => Number(res.header("x-tokens")) },
        onDecision: () =>
          new Promise<void>((resolve) =>
            setTimeout(() => {
              hookDone = true;
              resolve();
            }, 50)
          ),
      },
    );
    await handler(REST_API_EVENT, {});
    expect(hookDone).toBe(true);
    expect((await handler.peek("192.0.2.1")).remaining).toBe(7);
  });

  it("a handler that throws: the invocation fails, and the estimate is settled", async () => {
    const handler = withRateLimit(async () => {
      throw new Error("boom");
    }, { policy: fixedWindow({ limit: 10, window: "1h" }), cost: { estimate: 2 } });
    await expect(handler(HTTP_API_EVENT, {})).rejects.toThrow("boom");
    expect((await handler.peek("192.0.2.1")).remaining).toBe(8);
  });
});
