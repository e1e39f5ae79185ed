// The third-party adapter of examples/fastify, written on @floodgate/core/http alone, on a real
// Fastify server over HTTP: admits up to the limit, answers the next request with a 429 and the
// headers, exposes the decision, and refunds failed requests under skipFailedRequests.
import { createRateLimiter, fixedWindow } from "@floodgate/core";
import Fastify, { type FastifyInstance } from "fastify";
import { afterEach, describe, expect, it } from "vitest";
import { addRateLimit, type FastifyRateLimitOptions } from "../../examples/fastify/rate-limit.ts";
import { ietfHeaders, T0 } from "./support.ts";

// A fixed clock: windows are aligned to the minute, and real time could cross a boundary mid-test.
const clock = (): number => T0;
const apps: FastifyInstance[] = [];
afterEach(async () => {
  for (const app of apps.splice(0)) await app.close();
});

async function start(options: FastifyRateLimitOptions): Promise<string> {
  const app = Fastify();
  apps.push(app);
  addRateLimit(app, options);
  app.get("/hello", async (request) => ({ remaining: request.rateLimit?.remaining, key: request.rateLimit?.key }));
  app.get("/fail", async (_request, reply) => reply.code(500).send({ error: "boom" }));
  return app.listen({ port: 0, host: "127.0.0.1" });
}

describe("examples/fastify: an adapter on @floodgate/core/http alone", () => {
  it("admits N requests, then answers the next with a 429, Retry-After and the rate-limit headers", async () => {
    const base = await start({ policy: fixedWindow({ limit: 3, window: "1m", name: "three" }), clock, warnings: false });
    for (let i = 0; i < 3; i++) {
      const response = await fetch(`${base}/hello?i=${i}`);
      expect(response.status).toBe(200);
      expect(await response.json()).toEqual({ remaining: 2 - i, key: "127.0.0.1" });
      expect(response.headers.get("x-ratelimit-limit")).toBe("3");
      expect(response.headers.get("x-ratelimit-remaining")).toBe(String(2 - i));
      expect(ietfHeaders(response.headers)).toEqual({ three: { q: 3, w: 60, r: 2 - i, t: 60 } });
    }
    const denied = await fetch(`${base}/hello`);
    expect(denied.status).toBe(429);
    expect(denied.headers.get("retry-after")).toBe("60");
    expect(denied.headers.get("x-ratelimit-remaining")).toBe("0");
    expect(denied.headers.get("content-type")).toMatch(/^application\/json/);
    expect(await denied.json()).toEqual({ error: { code: "RATE_LIMITED", message: expect.any(String), retryAfter: 60 } });
  });

  it("refunds requests that fail under skipFailedRequests, and counts them without it", async () => {
    for (const skipFailedRequests of [true, false]) {
      const limiter = createRateLimiter({ policy: fixedWindow({ limit: 2, window: "1m" }), clock });
      const base = await start({ limiter, skipFailedRequests, warnings: false });
      const statuses: number[] = [];
      for (const path of ["/fail", "/fail", "/hello", "/hello", "/hello"]) statuses.push((await fetch(`${base}${path}`)).status);
      expect(statuses, `skipFailedRequests: ${skipFailedRequests}`).toEqual(
        skipFailedRequests ? [500, 500, 200, 200, 429] : [500, 500, 429, 429, 429],
      );
    }
  });
});
