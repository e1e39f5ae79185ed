/**
 * Arguments refused with a FloodgateError naming what was wrong, before anything is charged: a
 * policy array with a hole (`[fixedWindow(...), , ]`), and a reservation `ttl` shorter than a
 * concurrency policy's `timeout` (it would hold the unit past the last moment it can be settled).
 */
import { describe, expect, it } from "vitest";
import {
  concurrency,
  createRateLimiter,
  fixedWindow,
  FloodgateError,
  memoryStore,
  type Policy,
  withRateLimit,
} from "../../packages/core/src/index.ts";

const hole = (): Policy[] => {
  // deno-lint-ignore no-sparse-arrays
  return [fixedWindow({ limit: 5, window: "1m" }), , fixedWindow({ limit: 50, window: "1h" })] as Policy[];
};

describe("a policy array with a hole", () => {
  it("createRateLimiter() refuses it with INVALID_OPTION naming the empty slot", () => {
    let thrown: unknown;
    try {
      createRateLimiter({ policy: hole(), store: memoryStore() });
    } catch (e) {
      thrown = e;
    }
    expect(thrown).toBeInstanceOf(FloodgateError);
    expect((thrown as FloodgateError).code).toBe("INVALID_OPTION");
    expect((thrown as FloodgateError).message).toMatch(/`policy`.*empty slot at index 1/);
  });

  it("a trailing hole (`[fixedWindow(...), , ]`) too", () => {
    // deno-lint-ignore no-sparse-arrays
    const trailing = [fixedWindow({ limit: 5, window: "1m" }), ,] as Policy[];
    expect(() => createRateLimiter({ policy: trailing })).toThrow(expect.objectContaining({ code: "INVALID_OPTION" }));
  });

  it("the HTTP middleware refuses it too, as `policy` and in `rules`", () => {
    expect(() => withRateLimit(() => new Response("ok"), { policy: hole(), warnings: false }))
      .toThrow(expect.objectContaining({ code: "INVALID_OPTION", message: expect.stringContaining("empty slot at index 1") }));
    expect(() => withRateLimit(() => new Response("ok"), { rules: { "GET /x": hole() }, warnings: false }))
      .toThrow(expect.objectContaining({ name: "FloodgateError" }));
  });
});

describe("a reservation ttl shorter than a concurrency timeout", () => {
  const limiter = () =>
    createRateLimiter({
      policy: [concurrency({ limit: 1, timeout: "2m", name: "inflight" }), concurrency({ limit: 5, timeout: "5m", name: "slow" })],
      store: memoryStore(),
    });

  it("is refused with INVALID_ARGUMENT naming both values, and holds no unit", async () => {
    const l = limiter();
    const error = await l.reserve("k", { ttl: "3m" }).then(() => undefined, (e: unknown) => e);
    expect(error).toBeInstanceOf(FloodgateError);
    expect((error as FloodgateError).code).toBe("INVALID_ARGUMENT");
    expect((error as FloodgateError).message).toContain("180000 ms");
    expect((error as FloodgateError).message).toContain('"slow" (300000 ms)');
    // Nothing was reserved: the limit-1 policy still admits one.
    const r = await l.reserve("k");
    expect(r.decision.allowed).toBe(true);
    await r.cancel();
  });

  it("a ttl as long as the longest timeout, or none (its default), is accepted and can be settled", async () => {
    const l = limiter();
    const a = await l.reserve("k", { ttl: "5m" });
    expect(a.decision.allowed).toBe(true);
    expect(await a.settle(1)).toBe(true);
    const b = await l.reserve("k");
    expect(b.decision.allowed).toBe(true);
    expect(await b.cancel()).toBe(true);
  });

  it("without a concurrency policy any ttl from 1 ms is accepted", async () => {
    const l = createRateLimiter({ policy: fixedWindow({ limit: 5, window: "1m" }), store: memoryStore() });
    const r = await l.reserve("k", { ttl: 1 });
    expect(r.decision.allowed).toBe(true);
  });
});
