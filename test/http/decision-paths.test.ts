// What the Koa middleware and `followDecision` do with a decision made at once.
import { fixedWindow } from "@floodgate/core";
import { createHttpRateLimiter, followDecision, NodeExchangeBase, RateLimitResult } from "@floodgate/core/http";
import { rateLimit as koaRateLimit } from "@floodgate/koa";
import { describe, expect, it } from "vitest";

const ACCESS = { method: (r: { method: string }) => r.method, path: () => "/x", header: () => undefined };
const GET = { method: "GET" };
const policy = fixedWindow({ limit: 2, window: "1m" });

describe("followDecision()", () => {
  const response = (destroyed: boolean) => ({ statusCode: 200, destroyed, writableFinished: !destroyed, once: () => undefined });

  it("makes no exchange for a request with nothing to settle, and tells when its client has gone", () => {
    const http = createHttpRateLimiter({ policy, warnings: false }, ACCESS);
    expect(followDecision(response(false), http.decide(GET, "192.0.2.1") as RateLimitResult)).toBeUndefined();
    expect(followDecision(response(true), http.decide(GET, "192.0.2.3") as RateLimitResult)).toBe(false);
  });

  it("follows a request with something to settle, with the exchange made before the decision when given", () => {
    const http = createHttpRateLimiter({ policy, skipFailedRequests: true, warnings: false }, ACCESS);
    expect(followDecision(response(false), http.decide(GET, "192.0.2.1") as RateLimitResult)).toBeInstanceOf(NodeExchangeBase);
    const made = new NodeExchangeBase(response(false));
    expect(followDecision(response(false), http.decide(GET, "192.0.2.2") as RateLimitResult, made)).toBe(made);
    expect(followDecision(response(true), http.decide(GET, "192.0.2.3") as RateLimitResult)).toBe(false);
  });
});

describe("the Koa middleware", () => {
  it("runs the next middleware in the same turn when decided at once, and returns its promise", () => {
    const headers: Record<string, string> = {};
    const res = { statusCode: 200, destroyed: false, once: () => undefined, setHeader: (n: string, v: string) => (headers[n] = v) };
    const ctx = {
      app: { proxy: false, middleware: [] },
      req: { socket: { remoteAddress: "192.0.2.1" }, headers: {} },
      res,
      method: "GET",
      originalUrl: "/x",
      state: {} as Record<string, unknown>,
    };
    const downstream = Promise.resolve("done");
    let ran = false;
    const middleware = koaRateLimit({ policy, warnings: false });
    const returned = middleware(ctx as never, () => ((ran = true), downstream) as never);
    expect(ran).toBe(true);
    expect(returned).toBe(downstream);
    expect(headers["x-ratelimit-remaining"]).toBe("1");
    expect((ctx.state.rateLimit as { remaining: number }).remaining).toBe(1);
  });
});
