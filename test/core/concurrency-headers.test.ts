/**
 * The draft-11 `RateLimit-Policy` of a concurrency policy: its quota and the quota unit
 * `qu="concurrent-requests"`, no window; beside a rate policy in one set, each as its own item.
 */
import { describe, expect, it } from "vitest";
import { concurrency, createRateLimiter, tokenBucket } from "../../packages/core/src/index.ts";
import { createHeaderWriter } from "../../packages/core/src/http/headers.ts";

describe("RateLimit-Policy of a concurrency policy", () => {
  it('is "<name>";q=<limit>;qu="concurrent-requests", with no window', async () => {
    const policies = [concurrency({ limit: 2, timeout: "2m" }), tokenBucket({ capacity: 10, refillRate: 1, name: "tb" })];
    const limiter = createRateLimiter({ policy: policies });
    const r = await limiter.reserve("k");
    const out = createHeaderWriter(["draft-11"], policies, "epoch")!(r.decision, Date.now());
    const headers = Object.fromEntries(out.flatMap((v, i) => (i % 2 === 0 ? [[v, out[i + 1]]] : [])));
    expect(headers["RateLimit-Policy"]).toBe('"2-concurrent";q=2;qu="concurrent-requests", "tb";q=10;w=10');
    expect(headers["RateLimit"]).toMatch(/^"2-concurrent";r=1;t=\d+, "tb";r=9;t=\d+$/);
  });
});
