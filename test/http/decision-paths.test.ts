// The decision's two paths: a rule whose policies, key and cost need no callback is decided in
// one call, any other through its steps; both must decide alike. Also what the Koa middleware
// and `followDecision` do with a decision made at once.
import { fixedWindow } from "@floodgate/core";
import { createHttpRateLimiter, followDecision, NodeExchangeBase, RateLimitResult } from "@floodgate/core/http";
import { rateLimit as koaRateLimit } from "@floodgate/koa";
import { describe, expect, it } from "vitest";

const ACCESS = { method: (r: { method: string }) => r.method, path: () => "/x", header: () => undefined };
const GET = { method: "GET" };
const policy = fixedWindow({ limit: 2, window: "1m" });
const clock = () => 1_800_000_000_000;

describe("the decision without callbacks, and through its steps", () => {
  it("decides alike: the same keys, figures and headers", () => {
    const plain = createHttpRateLimiter({ policy, clock, warnings: false }, ACCESS);
    // A key function that gives nothing keys by the address too, through the steps.
    const stepped = createHttpRateLimiter({ policy, clock, key: () => undefined, warnings: false }, ACCESS);
    for (const ip of ["192.0.2.1", "192.0.2.1", "192.0.2.1", "2001:db8::1", undefined]) {
      const a = plain.decide(GET, ip) as RateLimitResult;
      const b = stepped.decide(GET, ip) as RateLimitResult;
      expect(a).toBeInstanceOf(RateLimitResult);
      expect(b).toBeInstanceOf(RateLimitResult);
      expect([a.info.key, a.allowed, a.info.remaining, a.headers, a.response?.status])
        .toEqual([b.info.key, b.allowed, b.info.remaining, b.headers, b.response?.status]);
    }
  });

  it("stays synchronous through the steps when the callbacks answer at once", () => {
    const http = createHttpRateLimiter({ policy, skip: () => false, key: () => "user-1", cost: () => 1, warnings: false }, ACCESS);
    const result = http.decide(GET, "192.0.2.1");
    expect(result).toBeInstanceOf(RateLimitResult);
    expect((result as RateLimitResult).info.key).toBe("user-1");
  });

  it("writes the default headers as the same formats listed one by one do", () => {
    const byDefault = createHttpRateLimiter({ policy, clock, warnings: false }, ACCESS);
    const listed = createHttpRateLimiter({ policy, clock, headers: ["legacy", "draft-11"], warnings: false }, ACCESS);
    for (let i = 0; i < 3; i++) {
      const a = byDefault.decide(GET, "192.0.2.1") as RateLimitResult;
      expect(a.headers).toEqual((listed.decide(GET, "192.0.2.1") as RateLimitResult).headers);
      expect(a.headers.slice(0, 4)).toEqual(["X-RateLimit-Limit", "2", "X-RateLimit-Remaining", String(Math.max(0, 1 - i))]);
    }
  });

  it("keys each address by itself, whatever address came before", () => {
    const http = createHttpRateLimiter({ policy, warnings: false }, ACCESS);
    const key = (ip: string | undefined, resolved = false) => (http.decide(GET, ip, resolved) as RateLimitResult).info;
    expect(key("192.0.2.1").remaining).toBe(1);
    expect(key("192.0.2.2")).toMatchObject({ key: "192.0.2.2", remaining: 1 });
    expect(key("not an address").key).toBe("unknown");
    expect(key("192.0.2.2", true)).toMatchObject({ key: "192.0.2.2", remaining: 0 });
    expect(key("::ffff:192.0.2.1")).toMatchObject({ key: "192.0.2.1", remaining: 0 });
  });

  it("still applies keys listed in denyList and allowList", () => {
    const denied = createHttpRateLimiter({ policy, denyList: ["unknown"], warnings: false }, ACCESS);
    expect((denied.decide(GET, undefined) as RateLimitResult).response?.status).toBe(403);
    const allowed = createHttpRateLimiter({ policy, allowList: ["unknown"], warnings: false }, ACCESS);
    expect(allowed.decide(GET, undefined)).toBeUndefined();
  });
});

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
