/**
 * Leases on the MySQL store: the lease procedure against the reference (evaluateState's lease
 * mode, which mirrors the Redis lease script step for step) on random sequences of requests and
 * returns; then leased mode end to end — decisions served from leases with no store call, unspent
 * units given back once into what they were charged in, several leased instances on one key
 * admitting no more than the limit.
 */
import fc from "fast-check";
import { afterAll, describe, expect, it } from "vitest";
import {
  createRateLimiter,
  fixedWindow,
  type LeaseRequest,
  type Policy,
  type PolicySet,
  slidingWindow,
  tokenBucket,
} from "../../packages/core/src/index.ts";
import { kvStore } from "../../examples/custom-store/kv-store.ts";
import { VersionedMap } from "../../examples/custom-store/versioned-map.ts";
import { uniquePrefix } from "../stores/store-contract.ts";
import { type MysqlHarness, mysqlHarness } from "./harness.ts";

const HOUR = 3_600_000;
const T0 = 1_700_002_800_000; // an hour boundary
const h: MysqlHarness | undefined = await mysqlHarness();

const leasable: fc.Arbitrary<Policy[]> = fc.array(
  fc.oneof(
    fc.integer({ min: 20, max: 400 }).map((limit) => fixedWindow({ limit, window: 60_000 })),
    fc.integer({ min: 20, max: 400 }).map((limit) => slidingWindow({ limit, window: 30_000 })),
    fc.integer({ min: 400, max: 2000 }).map((capacity) => tokenBucket({ capacity, refillRate: 10 })),
  ),
  { minLength: 1, maxLength: 3 },
).map((ps) => ps.map((p, i) => Object.freeze({ ...p, name: `p${i}` })));

interface Step {
  dt: number;
  cost: number;
  want: number;
  /** Give back the lease granted this many steps ago (0: none), with this many units unspent. */
  back: number;
  unspent: number;
  /** Send this step's request again (a retried call). */
  retry: boolean;
}

const stepArb: fc.Arbitrary<Step> = fc.record({
  dt: fc.integer({ min: 0, max: 8000 }),
  cost: fc.integer({ min: 0, max: 5 }),
  want: fc.integer({ min: 0, max: 80 }),
  back: fc.integer({ min: 0, max: 3 }),
  unspent: fc.integer({ min: 0, max: 100 }),
  retry: fc.boolean(),
});

describe.skipIf(h === undefined)("leases on mysql", () => {
  afterAll(async () => {
    await h?.close();
  });

  it("the lease procedure answers as the reference on random requests, returns and retries", async () => {
    await fc.assert(
      fc.asyncProperty(leasable, fc.array(stepArb, { minLength: 1, maxLength: 25 }), async (policies, steps) => {
        const set: PolicySet = Object.freeze({ prefix: uniquePrefix(), policies: Object.freeze(policies) });
        const reference = kvStore(new VersionedMap());
        const subject = h!.store("local");
        // Leases granted, with when: one is given back only within its record's grace (10 s after
        // its end), where every store still holds the record (past it, when the record goes
        // differs: a TTL, a sweep, the next write of the key).
        const granted: { id: string; at: number }[] = [];
        let now = T0 + 1000;
        for (const [i, step] of steps.entries()) {
          now += step.dt;
          const lease = step.back > 0 ? granted[granted.length - step.back] : undefined;
          const returned = lease !== undefined && now - lease.at < 10_000 ? lease.id : undefined;
          const request: LeaseRequest = {
            cost: step.cost,
            want: step.want,
            lifeMs: 5000,
            minLifeMs: 500,
            id: `l${i}`,
            ...(returned === undefined ? {} : { returns: [{ id: returned, unspent: step.unspent }] }),
          };
          const expected = [...(await reference.lease!(set, "k", request, now))];
          const actual = [...(await subject.lease(set, "k", request, now))];
          expect(actual, `step ${i}`).toEqual(expected);
          // A retried call: one that was granted a lease answers from its record; one that was not is a new call.
          if (step.retry) {
            const again = [...(await reference.lease!(set, "k", request, now))];
            expect([...(await subject.lease(set, "k", request, now))], `step ${i} retried`).toEqual(again);
          }
          if (expected[expected.length - 3]! > 0) granted.push({ id: request.id, at: now });
          const peek = [await reference.peek(set, "k", now), await subject.peek(set, "k", now)];
          expect([...peek[1]!], `step ${i}: state after`).toEqual([...peek[0]!]);
        }
      }),
      { numRuns: 60 },
    );
  }, 300_000);

  it("leased mode serves decisions from a lease with no store call; flush() gives the unspent units back, once", async () => {
    let now = T0 + 1000;
    const prefix = uniquePrefix();
    const policy = fixedWindow({ limit: 1000, window: HOUR });
    const limiter = createRateLimiter({ policy, store: h!.store("local"), prefix, clock: () => now, mode: "leased" });
    const exact = createRateLimiter({ policy, store: h!.store("local"), prefix, clock: () => now });
    expect(limiter.mode).toBe("leased");
    let fromStore = 0;
    for (let i = 0; i < 200; i++) {
      now += 10;
      const d = await limiter.limit("k");
      expect(d.allowed).toBe(true);
      if (d.source === "store") fromStore++;
      else expect(d.source).toBe("lease");
      await d.pending;
    }
    expect(fromStore).toBeLessThan(40);
    expect(1000 - (await exact.peek("k")).remaining).toBeGreaterThanOrEqual(200);
    await limiter.flush();
    expect(1000 - (await exact.peek("k")).remaining).toBe(200);
    await limiter.flush();
    expect(1000 - (await exact.peek("k")).remaining).toBe(200);
  });

  it(
    "four leased instances on one key, 1,000 decisions at the server's clock: at most the limit admitted, every admission charged",
    async () => {
      const prefix = uniquePrefix();
      const policy = fixedWindow({ limit: 100, window: HOUR });
      const instances = Array.from({ length: 4 }, () => createRateLimiter({ policy, store: h!.store("server"), prefix, mode: "leased" }));
      let admitted = 0;
      for (let round = 0; round < 250; round++) {
        const decisions = await Promise.all(instances.map((l) => l.limit("hot")));
        admitted += decisions.filter((d) => d.allowed).length;
        await Promise.all(decisions.map((d) => d.pending));
      }
      await Promise.all(instances.map((l) => l.flush()));
      const exact = createRateLimiter({ policy, store: h!.store("server"), prefix });
      expect(admitted).toBeLessThanOrEqual(100);
      expect(admitted).toBeGreaterThanOrEqual(90);
      expect(100 - (await exact.peek("hot")).remaining).toBe(admitted);
    },
    120_000,
  );
});
