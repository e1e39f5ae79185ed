// Shadow policies and warning thresholds at the limiter (`shadowPolicy`, `warnAt`): a shadow
// policy is decided and charged exactly as an enforced one would be, never changes what the
// enforced ones decide, and refunds, settlements and resets reach it once; a warning is reported
// on the request that crosses its threshold only. On the memory store and on a real Redis.
import { Redis as IORedis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  concurrency,
  createRateLimiter,
  type Decision,
  fixedWindow,
  memoryStore,
  type RateLimitStore,
  redisStore,
  tokenBucket,
} from "../../packages/core/src/index.ts";
import { type RedisInstance, startRedis } from "../support/redis-server.ts";

const HOUR = 3_600_000;

describe.each(["memory", "redis"] as const)("shadow policies on the %s store", (kind) => {
  let redis: RedisInstance | undefined;
  let client: IORedis | undefined;
  beforeAll(async () => {
    if (kind !== "redis") return;
    redis = await startRedis();
    client = new IORedis(redis.port, redis.host);
  });
  afterAll(async () => {
    client?.disconnect();
    await redis?.stop();
  });
  let n = 0;
  const storeOf = (): RateLimitStore => (kind === "memory" ? memoryStore() : redisStore({ client: client! }));
  // Every test in a namespace of its own on the shared Redis; a fixed clock inside one hour window.
  const clock = () => 10 * HOUR + 1_000;
  const prefixOf = () => `t${++n}:`;

  it("a shadow policy counts what enforcing it would keep, and never decides", async () => {
    const store = storeOf();
    const prefix = prefixOf();
    const limiter = createRateLimiter({
      policy: fixedWindow({ limit: 5, window: "1h", name: "enforced" }),
      shadowPolicy: fixedWindow({ limit: 3, window: "1h", name: "strict" }),
      store,
      prefix,
      clock,
    });
    // The same policy enforced, on its own, as the reference.
    const reference = createRateLimiter({
      policy: fixedWindow({ limit: 3, window: "1h", name: "strict" }),
      store,
      prefix: `${prefix}ref:`,
      clock,
    });
    const seen: Decision[] = [];
    for (let i = 0; i < 7; i++) {
      const d = await limiter.limit("k");
      seen.push(d);
      const r = await reference.limit("k");
      if (d.allowed) {
        expect(d.shadow).toHaveLength(1);
        expect(d.shadow[0]!.allowed).toBe(r.allowed);
        expect(d.shadow[0]!.remaining).toBe(r.remaining);
      }
    }
    // The enforced policy decides alone: 5 admitted, as without the shadow one.
    expect(seen.map((d) => d.allowed)).toEqual([true, true, true, true, true, false, false]);
    expect(seen.slice(0, 5).map((d) => d.shadow[0]!.allowed)).toEqual([true, true, true, false, false]);
    // Enforced denials do not ask the shadow set: nothing charged there.
    expect(seen[5]!.shadow).toEqual([]);
    // The shadow count is 3 (its would-be denials charged nothing), as the reference's.
    expect((await limiter.peek("k")).shadow[0]!.remaining).toBe(0);
    expect((await reference.peek("k")).remaining).toBe(0);
    expect(limiter.shadowPolicies!.map((p) => p.name)).toEqual(["strict"]);
  });

  it("an enforced decision is the same with or without shadow policies", async () => {
    const store = storeOf();
    const prefix = prefixOf();
    const policy = [tokenBucket({ capacity: 4, refillRate: 1, name: "bucket" }), fixedWindow({ limit: 6, window: "1h", name: "hourly" })];
    const plain = createRateLimiter({ policy, store, prefix: `${prefix}plain:`, clock });
    const shadowed = createRateLimiter({
      policy,
      shadowPolicy: [fixedWindow({ limit: 1, window: "1h", name: "tiny" })],
      store,
      prefix,
      clock,
    });
    for (let i = 0; i < 6; i++) {
      const a = await plain.limit("k", { cost: 1 + (i % 2) });
      const b = await shadowed.limit("k", { cost: 1 + (i % 2) });
      // Redis keeps time itself: the two limiters' resetAt may differ by the ms between calls.
      const figures = (d: Decision) => d.policies.map(({ resetAt: _r, retryAfterMs, ...p }) => ({ ...p, waits: retryAfterMs > 0 }));
      expect([b.allowed, b.policy, b.remaining, b.retryAfterMs > 0]).toEqual([a.allowed, a.policy, a.remaining, a.retryAfterMs > 0]);
      expect(figures(b)).toEqual(figures(a));
      if (kind === "memory") expect([b.resetAt, b.retryAfterMs]).toEqual([a.resetAt, a.retryAfterMs]);
    }
  });

  it("a refund into a charge gives back to the shadow policies what they were charged, once", async () => {
    const limiter = createRateLimiter({
      policy: fixedWindow({ limit: 10, window: "1h", name: "enforced" }),
      shadowPolicy: fixedWindow({ limit: 10, window: "1h", name: "shadow" }),
      store: storeOf(),
      prefix: prefixOf(),
      clock,
    });
    const d = await limiter.limit("k", { cost: 3 });
    expect(d.charge?.shadow).toHaveLength(1);
    expect(JSON.parse(JSON.stringify(d.charge))).toEqual(d.charge);
    await limiter.refund("k", { charge: d.charge! });
    const after = await limiter.peek("k");
    expect(after.remaining).toBe(10);
    expect(after.shadow[0]!.remaining).toBe(10);
    await limiter.reset("k");
  });

  it("a reservation settles the shadow part too, and releases a shadow concurrency unit", async () => {
    const limiter = createRateLimiter({
      policy: fixedWindow({ limit: 100, window: "1h", name: "enforced" }),
      shadowPolicy: concurrency({ limit: 1, name: "inflight" }),
      store: storeOf(),
      prefix: prefixOf(),
      clock,
    });
    // A shadow concurrency policy holds a unit: limit() is refused as for an enforced one.
    expect(() => limiter.decide("k")).toThrow(expect.objectContaining({ code: "INVALID_ARGUMENT" }));
    const first = await limiter.reserve("k");
    expect(first.decision.allowed).toBe(true);
    expect(first.decision.shadow[0]!.allowed).toBe(true);
    const second = await limiter.reserve("k");
    // Enforced: admitted; the shadow concurrency limit would have refused it.
    expect(second.decision.allowed).toBe(true);
    expect(second.decision.shadow[0]!.allowed).toBe(false);
    await second.cancel();
    expect(await first.settle(1)).toBe(true);
    expect(await first.settle(1)).toBe(false);
    const third = await limiter.reserve("k");
    expect(third.decision.shadow[0]!.allowed).toBe(true);
    // Settled by id, as from another process: both parts.
    expect(await limiter.settle("k", { id: third.id, actual: 1 })).toBe(true);
    expect((await limiter.peek("k")).shadow[0]!.remaining).toBe(1);
    await limiter.flush();
  });

  it("warnAt reports the request that crosses the threshold, once per window", async () => {
    const limiter = createRateLimiter({
      policy: fixedWindow({ limit: 10, window: "1h", name: "hourly" }),
      warnAt: 0.7,
      store: storeOf(),
      prefix: prefixOf(),
      clock,
    });
    const warned: number[] = [];
    for (let i = 1; i <= 12; i++) {
      const d = await limiter.limit("k");
      if (d.warnings.length > 0) {
        warned.push(i);
        expect(d.warnings).toEqual([{ policy: "hourly", threshold: 0.7, limit: 10, remaining: 3 }]);
      }
    }
    expect(warned).toEqual([7]);
  });
});

describe("warnAt on a token bucket", () => {
  it("warns once per crossing: again after the bucket has refilled above the threshold", async () => {
    let now = 1_000_000;
    const limiter = createRateLimiter({
      policy: tokenBucket({ capacity: 10, refillRate: 1, name: "bucket" }),
      warnAt: { bucket: 0.5 },
      clock: () => now,
    });
    const warnedAt: number[] = [];
    const take = async (cost: number, label: number) => {
      const d = await limiter.limit("k", { cost });
      if (d.warnings.length > 0) warnedAt.push(label);
    };
    await take(4, 1); // 6 left
    await take(2, 2); // 4 left: crosses 5
    await take(1, 3); // below already: no warning
    now += 5_000; // refills to 8
    await take(1, 4); // 7 left: above
    await take(3, 5); // 4 left: crosses again
    expect(warnedAt).toEqual([2, 5]);
  });

  it("a cost that jumps past the threshold warns once; a denial never warns", async () => {
    const limiter = createRateLimiter({ policy: fixedWindow({ limit: 5, window: "1h" }), warnAt: 0.8 });
    expect((await limiter.limit("k", { cost: 5 })).warnings).toHaveLength(1);
    const denied = await limiter.limit("k");
    expect(denied.allowed).toBe(false);
    expect(denied.warnings).toEqual([]);
  });
});

describe("shadowPolicy and warnAt options", () => {
  const policy = fixedWindow({ limit: 5, window: "1m", name: "hourly" });
  it.each([
    [{ warnAt: 0 }, /`warnAt`.*greater than 0 and at most 1/],
    [{ warnAt: 1.5 }, /`warnAt`.*greater than 0 and at most 1/],
    [{ warnAt: { a: "80%" } }, /`warnAt`/],
    [{ warnAt: { hourl: 0.8 } }, /`warnAt`: no policy is named "hourl" \(did you mean "hourly"\?\)/],
    [{ shadowPolicy: policy }, /two policies share a name/],
    [{ shadowPolicy: [] }, /`shadowPolicy`/],
    [{ shadowPolcy: policy }, /did you mean `shadowPolicy`/],
  ])("%j is refused with INVALID_OPTION naming the option", (extra, message) => {
    expect(() => createRateLimiter({ policy, ...(extra as object) })).toThrow(
      expect.objectContaining({ code: "INVALID_OPTION", message: expect.stringMatching(message) }),
    );
  });

  it("a limiter without them is the plain one: shared empty figures, no wrapper", async () => {
    const a = await createRateLimiter({ policy }).limit("k");
    const b = await createRateLimiter({ policy: [policy, fixedWindow({ limit: 9, window: "1h" })] }).limit("k");
    expect(a.shadow).toBe(b.shadow);
    expect(a.warnings).toBe(b.warnings);
    expect(Object.isFrozen(a.shadow) && Object.isFrozen(a.warnings)).toBe(true);
    expect(Object.keys(a)).not.toContain("shadow");
  });
});
