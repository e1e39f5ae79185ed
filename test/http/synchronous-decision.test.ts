// The decision without a promise: `decide()` answers at once when nothing it waits for is
// pending, a promise otherwise, and fails the same way `decideRequest()` does.
import { fixedWindow, memoryStore, type RateLimitStore } from "@floodgate/core";
import { createHttpRateLimiter, NodeExchange, NodeExchangeBase, parseIp, RateLimitResult, thenOrNow } from "@floodgate/core/http";
import { describe, expect, it } from "vitest";

const ACCESS = { method: (r: { method: string }) => r.method, path: () => "/x", header: () => undefined };
const GET = { method: "GET" };
const policy = fixedWindow({ limit: 2, window: "1m" });

/** A memory store whose answers come back as promises, as a remote store's do. */
function asyncStore(): RateLimitStore {
  const inner = memoryStore();
  return {
    name: "async",
    consume: (...args: Parameters<RateLimitStore["consume"]>) => Promise.resolve(inner.consume(...args)),
    peek: (...args: Parameters<RateLimitStore["peek"]>) => Promise.resolve(inner.peek(...args)),
    refund: (...args: Parameters<RateLimitStore["refund"]>) => Promise.resolve(inner.refund(...args)),
    reset: (...args: Parameters<RateLimitStore["reset"]>) => Promise.resolve(inner.reset(...args)),
  };
}

describe("decide()", () => {
  it("answers at once on the memory store with synchronous callbacks, as decideRequest() resolves", async () => {
    const http = createHttpRateLimiter({ policy, warnings: false }, ACCESS);
    const first = http.decide(GET, "192.0.2.1");
    expect(first).toBeInstanceOf(RateLimitResult);
    expect((first as RateLimitResult).allowed).toBe(true);
    expect((first as RateLimitResult).info.remaining).toBe(1);
    const second = await http.decideRequest(GET, "192.0.2.1");
    expect(second?.info.remaining).toBe(0);
    const third = http.decide(GET, "192.0.2.1") as RateLimitResult;
    expect(third.allowed).toBe(false);
    expect(third.response?.status).toBe(429);
  });

  it("returns a promise from the first callback or store answer that is one, and goes on from there", async () => {
    const keyed = createHttpRateLimiter({ policy, key: async () => "user-1", warnings: false }, ACCESS);
    const byKey = keyed.decide(GET, "192.0.2.1");
    expect(byKey).toBeInstanceOf(Promise);
    expect((await byKey)?.info.key).toBe("user-1");
    const remote = createHttpRateLimiter({ policy, store: asyncStore(), warnings: false }, ACCESS);
    const byStore = remote.decide(GET, "192.0.2.1");
    expect(byStore).toBeInstanceOf(Promise);
    expect((await byStore)?.info.remaining).toBe(1);
    const skipping = createHttpRateLimiter({ policy, skip: async () => true, warnings: false }, ACCESS);
    expect(await skipping.decide(GET, "192.0.2.1")).toBeUndefined();
  });

  it("throws what decideRequest() rejects with, synchronously or from the promise", async () => {
    const badCost = createHttpRateLimiter({ policy, cost: () => -1, warnings: false }, ACCESS);
    expect(() => badCost.decide(GET, "192.0.2.1")).toThrow(/must return a whole number/);
    await expect(badCost.decideRequest(GET, "192.0.2.1")).rejects.toThrow(/must return a whole number/);
    const lateBadCost = createHttpRateLimiter({ policy, key: async () => "k", cost: () => 1.5, warnings: false }, ACCESS);
    await expect(lateBadCost.decide(GET, "192.0.2.1")).rejects.toThrow(/must return a whole number/);
  });

  it("upper-cases any method but the common ones, which come as they are", async () => {
    const seen: string[] = [];
    const http = createHttpRateLimiter({
      policy: fixedWindow({ limit: 100, window: "1m" }),
      key: (req) => (seen.push(req.method), "k"),
      warnings: false,
    }, ACCESS);
    for (const method of ["GET", "POST", "get", "Delete", "PATCH"]) http.decide({ method }, "192.0.2.1");
    expect(seen).toEqual(["GET", "POST", "GET", "DELETE", "PATCH"]);
  });
});

describe("thenOrNow()", () => {
  it("hands a value over at once, a promise's once resolved, and every failure to `failed`", async () => {
    const got: unknown[] = [];
    const failures: unknown[] = [];
    thenOrNow(() => 1, (v) => void got.push(v), (e) => failures.push(e));
    expect(got).toEqual([1]);
    thenOrNow(() => Promise.resolve(2), (v) => void got.push(v), (e) => failures.push(e));
    expect(got).toEqual([1]);
    await Promise.resolve();
    expect(got).toEqual([1, 2]);
    thenOrNow(
      () => {
        throw new Error("run");
      },
      () => undefined,
      (e) => failures.push((e as Error).message),
    );
    thenOrNow(() => 3, () => {
      throw new Error("then");
    }, (e) => failures.push((e as Error).message));
    thenOrNow(() => 4, () => Promise.reject(new Error("returned")), (e) => failures.push((e as Error).message));
    thenOrNow(() => Promise.reject(new Error("rejected")), () => undefined, (e) => failures.push((e as Error).message));
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(failures.sort()).toEqual(["rejected", "returned", "run", "then"]);
  });
});

describe("NodeExchangeBase, parseIp", () => {
  it("NodeExchange adds followResponse to the base; the base has the rest", () => {
    expect(typeof (NodeExchangeBase.prototype as unknown as Record<string, unknown>).followResponse).toBe("undefined");
    expect(typeof NodeExchange.prototype.followResponse).toBe("function");
    expect(new NodeExchange({ statusCode: 200, destroyed: false, once: () => undefined })).toBeInstanceOf(NodeExchangeBase);
  });

  it("parses a plain dotted quad as it is, and every other spelling as before", () => {
    expect(parseIp("203.0.113.7")).toEqual({ v: 4, n: 0xcb007107, text: "203.0.113.7" });
    expect(parseIp(" 203.0.113.7 ")).toEqual({ v: 4, n: 0xcb007107, text: "203.0.113.7" });
    expect(parseIp("::ffff:203.0.113.7")).toEqual({ v: 4, n: 0xcb007107, text: "203.0.113.7" });
    expect(parseIp("203.0.113.7:8080")).toEqual({ v: 4, n: 0xcb007107, text: "203.0.113.7" });
    expect(parseIp("203.0.113.07")).toBeUndefined();
    expect(parseIp("203.0.113")).toBeUndefined();
  });
});
