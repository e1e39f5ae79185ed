// The playground's simulator (docs/playground/simulate.ts), in Node: the seed scenarios give the
// demo's numbers (scripts/scenarios.ts drives the engine its own way), instances share one limit
// through one store, the seeded patterns are reproducible, and retries honour Retry-After.
import { describe, expect, it } from "vitest";
import { boundaryBurst, boundaryContenders, burstThenSteady, steadyContenders } from "../../scripts/scenarios.ts";
import { parseTimestamps, type Scenario, ScenarioError, SEED_SCENARIOS, seededRandom, simulate } from "../../docs/playground/simulate.ts";

const run = (scenario: Scenario, kind: string) => simulate(scenario).runs.find((r) => r.kind === kind)!;

describe("playground simulator", () => {
  it("boundary burst: each algorithm admits what the demo's scenario admits before and after the boundary", async () => {
    for (const { policy } of boundaryContenders) {
      const expected = await boundaryBurst(policy);
      const r = run(SEED_SCENARIOS["boundary-burst"], policy.kind);
      expect(r.policyName).toBe(policy.name);
      const before = r.requests.filter((q) => q.t < 0 && q.allowed).length;
      const after = r.requests.filter((q) => q.t >= 0 && q.allowed).length;
      expect([before, after], policy.kind).toEqual([expected.lastSecond, expected.firstSecond]);
      expect(r.requests).toHaveLength(200);
    }
  });

  it("burst then steady: each algorithm admits what the demo's scenario admits in the burst and in each second after", async () => {
    for (const { policy } of steadyContenders) {
      const expected = await burstThenSteady(policy);
      const r = run(SEED_SCENARIOS["burst-then-steady"], policy.kind);
      expect(r.policyName).toBe(policy.name);
      const burst = r.requests.slice(0, 150).filter((q) => q.allowed).length;
      const perSecond = expected.perSecond.map((_, s) =>
        r.requests.slice(150).filter((q) => q.allowed && q.t > s * 1000 && q.t <= (s + 1) * 1000).length
      );
      expect({ burst, perSecond }, policy.kind).toEqual(expected);
    }
  });

  it("instances sharing one store make the same decisions as one instance; their counts add up", () => {
    const one = simulate(SEED_SCENARIOS["burst-then-steady"]);
    for (const instances of [2, 3, 4]) {
      const many = simulate({ ...SEED_SCENARIOS["burst-then-steady"], instances });
      for (const [i, r] of many.runs.entries()) {
        expect(r.requests.map((q) => q.allowed)).toEqual(one.runs[i]!.requests.map((q) => q.allowed));
        expect(r.requests.map((q) => q.instance)).toEqual(r.requests.map((_, j) => j % instances));
        expect(r.perInstance).toHaveLength(instances);
        expect(r.perInstance.reduce((a, c) => a + c.admitted, 0)).toBe(r.admitted);
        expect(r.perInstance.reduce((a, c) => a + c.denied, 0)).toBe(r.denied);
      }
    }
  });

  it("instances with a store each admit the limit each: four sliding logs admit the whole boundary burst", () => {
    const shared = run({ ...SEED_SCENARIOS["boundary-burst"], instances: 4 }, "sliding-log");
    const separate = run({ ...SEED_SCENARIOS["boundary-burst"], instances: 4, separateStores: true }, "sliding-log");
    expect(shared.admitted).toBe(100);
    expect(separate.admitted).toBe(200);
    expect(separate.perInstance.map((c) => c.admitted)).toEqual([50, 50, 50, 50]);
  });

  it("Poisson traffic is the same for the same seed, other for another seed, at about the asked rate", () => {
    const pattern = { kind: "poisson", ratePerS: 50, durationS: 60, seed: 42 } as const;
    const params = SEED_SCENARIOS["burst-then-steady"].params;
    const a = simulate({ params, pattern, instances: 1 }).runs[0]!;
    const b = simulate({ params, pattern, instances: 1 }).runs[0]!;
    const c = simulate({ params, pattern: { ...pattern, seed: 43 }, instances: 1 }).runs[0]!;
    expect(a.requests).toEqual(b.requests);
    expect(a.requests.map((q) => q.t)).not.toEqual(c.requests.map((q) => q.t));
    // 3000 expected; a Poisson count's standard deviation is about 55.
    expect(a.requests.length).toBeGreaterThan(2700);
    expect(a.requests.length).toBeLessThan(3300);
    const times = a.requests.map((q) => q.t);
    expect(times).toEqual([...times].sort((x, y) => x - y));
    expect(Math.min(...times)).toBeGreaterThanOrEqual(0);
    expect(Math.max(...times)).toBeLessThan(60_000);
  });

  it("the seeded generator is mulberry32, as its reference implementation computes it, in [0, 1)", () => {
    // The reference, as published (github.com/bryc/code, jshash/PRNGs.md).
    function mulberry32(a: number): () => number {
      return function () {
        let t = (a += 0x6d2b79f5);
        t = Math.imul(t ^ (t >>> 15), t | 1);
        t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
        return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
      };
    }
    for (const seed of [0, 1, 42, 2 ** 32 - 1]) {
      const ours = seededRandom(seed);
      const reference = mulberry32(seed);
      const values = Array.from({ length: 1000 }, ours);
      expect(values, `seed ${seed}`).toEqual(Array.from({ length: 1000 }, reference));
      expect(values.every((v) => v >= 0 && v < 1)).toBe(true);
    }
  });

  it("a retry storm's client waits the whole seconds of Retry-After, then retries", () => {
    // One client, a request every 100 ms, 2 per 10 s: the third of each window is denied until
    // the next window, Retry-After rounds up to 10 s, and the retry lands in the next window.
    const params = { ...SEED_SCENARIOS["burst-then-steady"].params, limit: 2, windowMs: 10_000 };
    const r = run(
      { params, pattern: { kind: "retry-storm", clients: 1, thinkMs: 100, durationS: 30, seed: 1 }, instances: 1 },
      "fixed-window",
    );
    const first = seededRandom(1)() * 100;
    const offsets = [0, 100, 200, 10_200, 10_300, 10_400, 20_400, 20_500, 20_600];
    expect(r.requests.map((q) => q.allowed)).toEqual([true, true, false, true, true, false, true, true, false]);
    r.requests.forEach((q, i) => expect(q.t).toBeCloseTo(first + offsets[i]!, 6));
  });

  it("custom timestamps are sorted and parsed from commas, spaces and new lines; bad ones are named", () => {
    expect(parseTimestamps("30, 10\n20;0  5")).toEqual([30, 10, 20, 0, 5]);
    expect(() => parseTimestamps("1, soon")).toThrow(/"soon" is not a number/);
    const r = run({ ...SEED_SCENARIOS["boundary-burst"], pattern: { kind: "custom", timesMs: [300, 100, 200] } }, "sliding-log");
    expect(r.requests.map((q) => q.t)).toEqual([100, 200, 300]);
    expect(() => simulate({ ...SEED_SCENARIOS["boundary-burst"], pattern: { kind: "custom", timesMs: [-1] } })).toThrow(ScenarioError);
  });

  it("bad scenarios throw a message naming what was wrong and what is accepted", () => {
    expect(() => simulate({ ...SEED_SCENARIOS["boundary-burst"], instances: 5 })).toThrow(
      /Instances must be a whole number from 1 to 4; received 5/,
    );
    expect(() => simulate({ ...SEED_SCENARIOS["boundary-burst"], pattern: { kind: "boundary", perSide: 0, spreadMs: 1000 } })).toThrow(
      /received 0/,
    );
    expect(() => simulate({ ...SEED_SCENARIOS["boundary-burst"], pattern: { kind: "poisson", ratePerS: 10_000, durationS: 60, seed: 1 } }))
      .toThrow(/at most 50000/);
    // Core validates the policies itself.
    expect(() => simulate({ ...SEED_SCENARIOS["boundary-burst"], params: { ...SEED_SCENARIOS["boundary-burst"].params, capacity: 0 } }))
      .toThrow(
        expect.objectContaining({ name: "FloodgateError", code: "INVALID_OPTION" }),
      );
  });
});
