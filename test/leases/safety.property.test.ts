/**
 * The safety rules of leased mode on random traces, through a real redis-server (TCP) and the
 * Upstash bridge: several instances (each a limiter with its own leases and its own store
 * client) decide on one key on a shared timeline that jumps to just before window ends (where a
 * lease that outlived its window would show), flush, die (their leases are lost) and burst.
 * Every admission is replayed by the independent checker through the exact algorithm: none may
 * be one exact mode would refuse. The checker is shown to catch an over-admission.
 */
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createRateLimiter,
  fixedWindow,
  type Policy,
  type RateLimiter,
  type RateLimitStore,
  slidingWindow,
  tokenBucket,
} from "../../packages/core/src/index.ts";
import { ALGORITHMS, POLICY_KINDS } from "../../packages/core/src/algorithms/registry.ts";
import { leaseReserve } from "../../packages/core/src/leases/rules.ts";
import { example } from "../support/kinds.ts";
import { kvStore } from "../../examples/custom-store/kv-store.ts";
import { VersionedMap } from "../../examples/custom-store/versioned-map.ts";
import { uniquePrefix } from "../stores/store-contract.ts";
import { ioredisHarness, upstashHarness } from "../redis/harness.ts";
import { type Admission, check, describePolicy } from "../support/exact-checker.ts";

const T0 = 1_700_002_800_000;

/** The kinds that declare a lease, from the registry: a kind added there is put through these traces. */
const LEASED_KINDS = POLICY_KINDS.filter((kind) => ALGORITHMS[kind].traits.lease !== undefined);

/**
 * A policy of a leased kind; when its reserve for `leaseMs` would exceed 20% of its limit (a token
 * bucket refilling fast), its window grows until the reserve fits within the accepted 25%.
 */
const leasedPolicy = (name: string, leaseMs: number) =>
  fc.record({
    kind: fc.constantFrom(...LEASED_KINDS),
    limit: fc.integer({ min: 5, max: 300 }),
    windowMs: fc.constantFrom(1000, 2000, 10_000, 60_000),
    share: fc.double({ min: 0.01, max: 0.2, noNaN: true }),
  }).map((p) => {
    const policy = example(p.kind, p.limit, p.windowMs, name);
    if (leaseReserve(policy, leaseMs) <= 0.2 * p.limit) return policy;
    return example(p.kind, Math.max(20, p.limit), Math.ceil(leaseMs / p.share), name);
  });

const step = fc.oneof(
  {
    weight: 10,
    arbitrary: fc.record({
      op: fc.constant("limit" as const),
      who: fc.nat(4),
      dtUs: fc.integer({ min: 0, max: 400_000 }),
      cost: fc.integer({ min: 1, max: 3 }),
    }),
  },
  { weight: 3, arbitrary: fc.record({ op: fc.constant("burst" as const), who: fc.nat(4), n: fc.integer({ min: 2, max: 40 }) }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant("edge" as const), beforeUs: fc.integer({ min: 0, max: 30_000 }) }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant("flush" as const), who: fc.nat(4) }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant("die" as const), who: fc.nat(4) }) },
);

const scenario = fc.integer({ min: 100, max: 3000 }).chain((leaseMs) =>
  fc.record({
    leaseMs: fc.constant(leaseMs),
    instances: fc.integer({ min: 1, max: 5 }),
    policies: fc.oneof(
      leasedPolicy("a", leaseMs).map((p) => [p]),
      fc.tuple(leasedPolicy("a", leaseMs), leasedPolicy("b", leaseMs)),
    ),
    steps: fc.array(step, { minLength: 5, maxLength: 60 }),
    startUs: fc.integer({ min: 0, max: 60_000_000 }),
  })
);

/** A store without scripts, on evaluateState's lease mode (the example store of docs/writing-a-store.md). */
interface TraceHarness {
  store(clock: "local"): RateLimitStore;
  close(): Promise<void>;
}
const kvHarness = async (): Promise<TraceHarness> => {
  const map = new VersionedMap();
  return { store: () => kvStore(map), close: async () => undefined };
};

describe.each([["ioredis", ioredisHarness], ["upstash", upstashHarness], ["kv (evaluateState)", kvHarness]] as const)(
  "leased mode's safety on random traces (%s)",
  (_name, make) => {
    let h: TraceHarness;
    beforeAll(async () => {
      h = await make();
    });
    afterAll(async () => {
      await h?.close();
    });

    it("admits nothing the exact algorithm would refuse (every leased kind of the registry, alone and in sets of two)", async () => {
      let leaseServed = 0;
      await fc.assert(
        fc.asyncProperty(scenario, async (s) => {
          // The timeline runs with real time plus the steps' jumps: Redis expires keys in real
          // time, so a timeline slower than real time would see keys vanish before their window ends.
          // Each decision is made at one instant: the clock reads the same during a limit() call
          // (the time its admission is recorded at), and moves on with real time between calls.
          const realUs = () => Math.floor(performance.now() * 1000);
          let offsetUs = T0 * 1000 + s.startUs - realUs();
          const nowUs = () => offsetUs + realUs();
          let instantMs = nowUs() / 1000;
          const clock = () => instantMs;
          const prefix = uniquePrefix();
          const make = (): RateLimiter =>
            createRateLimiter({
              policy: s.policies as Policy[],
              store: h.store("local"),
              prefix,
              clock,
              mode: "leased",
              leaseMs: s.leaseMs,
            });
          const limiters = Array.from({ length: s.instances }, make);
          const admitted: Admission[] = [];
          const decide = async (who: number, cost: number) => {
            const atMs = (instantMs = nowUs() / 1000);
            const d = await limiters[who % limiters.length]!.limit("hot", { cost });
            // The time the decision was made at, as the store reads it (floor of ms × 1000).
            if (d.allowed) admitted.push({ atUs: Math.floor(atMs * 1000), cost, by: who });
            if (d.source === "lease") leaseServed++;
            await d.pending;
          };
          for (const st of s.steps) {
            if (st.op === "limit") {
              offsetUs += st.dtUs;
              await decide(st.who, st.cost);
            } else if (st.op === "burst") {
              for (let i = 0; i < st.n; i++) await decide(st.who, 1);
            } else if (st.op === "edge") {
              // Just before the end of the first policy's current window (or a bucket's second).
              const first = s.policies[0]!;
              const size = (ALGORITHMS[first.kind].traits.lease!.windowed ? first.windowMs : 1000) * 1000;
              const now = nowUs();
              const end = (Math.floor(now / size) + 1) * size;
              offsetUs += Math.max(0, end - st.beforeUs - now);
            } else if (st.op === "flush") {
              instantMs = nowUs() / 1000;
              await limiters[st.who % limiters.length]!.flush();
            } else {
              limiters[st.who % limiters.length] = make(); // its leases die with it
            }
          }
          const violations = check(s.policies.map(describePolicy), admitted);
          expect(violations).toEqual([]);
        }),
        { numRuns: 60 },
      );
      // The traces did exercise leases.
      expect(leaseServed).toBeGreaterThan(100);
    }, 120_000);
  },
);

describe("the checker", () => {
  it("catches over-admission: a 10-per-second window admitting 11, a bucket admitting past its capacity", () => {
    const fw = [describePolicy(fixedWindow({ limit: 10, window: 1000 }))];
    const within = Array.from({ length: 10 }, (_, i) => ({ atUs: 5_000_000 + i, cost: 1 }));
    expect(check(fw, within)).toEqual([]);
    expect(check(fw, [...within, { atUs: 5_999_999, cost: 1 }])).toHaveLength(1);
    expect(check(fw, [...within, { atUs: 6_000_000, cost: 1 }])).toEqual([]);
    const tb = [describePolicy(tokenBucket({ capacity: 5, refillRate: 1 }))];
    const five = Array.from({ length: 5 }, () => ({ atUs: 1_000_000, cost: 1 }));
    expect(check(tb, five)).toEqual([]);
    expect(check(tb, [...five, { atUs: 1_500_000, cost: 1 }])).toHaveLength(1);
    expect(check(tb, [...five, { atUs: 2_000_000, cost: 1 }])).toEqual([]);
    const sw = [describePolicy(slidingWindow({ limit: 10, window: 1000 }))];
    const previous = Array.from({ length: 10 }, () => ({ atUs: 1_000_000, cost: 1 }));
    // Half-way into the next window, half of the previous 10 still weighs: 5 more fit, not 6.
    const half = Array.from({ length: 5 }, () => ({ atUs: 2_500_000, cost: 1 }));
    expect(check(sw, [...previous, ...half])).toEqual([]);
    expect(check(sw, [...previous, ...half, { atUs: 2_500_000, cost: 1 }])).toHaveLength(1);
  });
});
