import { describe, expect, it } from "vitest";
import { boundaryBurst, boundaryContenders, burstThenSteady, steadyContenders } from "../../scripts/scenarios.ts";

const byKind = <T extends { policy: { kind: string } }>(list: T[], kind: string): T => list.find((c) => c.policy.kind === kind)!;

describe("seed scenario 1: boundary burst (100 per 60 s)", () => {
  it("fixed window admits 200 within two seconds", async () => {
    expect(await boundaryBurst(byKind(boundaryContenders, "fixed-window").policy)).toEqual({
      lastSecond: 100,
      firstSecond: 100,
      total: 200,
    });
  });
  it("sliding log admits exactly 100", async () => {
    expect((await boundaryBurst(byKind(boundaryContenders, "sliding-log").policy)).total).toBe(100);
  });
  it("sliding-window counter stays within its bound (< 2 × limit per window-long interval): 101 here", async () => {
    const r = await boundaryBurst(byKind(boundaryContenders, "sliding-window").policy);
    expect(r.lastSecond).toBe(100);
    // The previous window weighs (60000 - 600) / 60000 = 99 at 600 ms in: one more fits, the next only at 1200 ms.
    expect(r.firstSecond).toBe(1);
  });
  it("a token bucket of 100 refilled at 100/60 per s admits about 100 (100 + what ~2 s refill)", async () => {
    const r = await boundaryBurst(byKind(boundaryContenders, "token-bucket").policy);
    expect(r.lastSecond).toBe(100);
    // 1.99 s of refill at 5/3 per s is 3.3 tokens: 3 more.
    expect(r.firstSecond).toBe(3);
  });
});

describe("seed scenario 2: burst then steady", () => {
  it("token bucket (capacity 100, refill 10/s): a burst of 100 passes at once, then 10 per second", async () => {
    const r = await burstThenSteady(byKind(steadyContenders, "token-bucket").policy);
    expect(r.burst).toBe(100);
    expect(r.perSecond).toEqual(Array(12).fill(10));
  });
  it("window algorithms admit the burst, then nothing until their window allows", async () => {
    const fixed = await burstThenSteady(byKind(steadyContenders, "fixed-window").policy);
    expect(fixed.burst).toBe(100);
    expect(fixed.perSecond.slice(0, 9)).toEqual(Array(9).fill(0));
    expect(fixed.perSecond[10]).toBe(50);
  });
});
