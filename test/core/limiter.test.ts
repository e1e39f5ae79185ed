import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  createRateLimiter,
  fixedWindow,
  FloodgateError,
  memoryStore,
  parseDuration,
  type Policy,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from "../../packages/core/src/index.ts";
import { example, KINDS } from "../support/kinds.ts";

const START = 1_767_225_600_000;
/** One policy of every registered kind, 5 per minute (a bucket of 5 refilled over a minute). */
const all = (): Policy[] => KINDS.map((kind) => example(kind, 5, 60_000));

const expectError = (fn: () => unknown, code: string, ...fragments: string[]): void => {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(FloodgateError);
    expect((error as FloodgateError).code).toBe(code);
    for (const f of fragments) expect((error as Error).message).toContain(f);
    return;
  }
  throw new Error("expected a FloodgateError");
};

describe.each(all().map((p) => [p.kind, p] as const))("%s", (_kind, policy) => {
  it("allows up to the limit, denies at N+1 with an exact retryAfterMs, and the denial consumes nothing", async () => {
    let now = START;
    const limiter = createRateLimiter({ policy, clock: () => now });
    for (let i = 0; i < 5; i++) expect((await limiter.limit("k")).remaining).toBe(4 - i);
    const denied = await limiter.limit("k");
    expect(denied).toMatchObject({ allowed: false, remaining: 0, limit: 5, policy: policy.name });
    expect(denied.retryAfterMs).toBeGreaterThan(0);
    // Denials leave the state alone: many more denials do not push the retry time out.
    for (let i = 0; i < 20; i++) expect((await limiter.limit("k")).retryAfterMs).toBe(denied.retryAfterMs);
    now += denied.retryAfterMs - 1;
    expect((await limiter.limit("k")).allowed).toBe(false);
    now += 1;
    expect((await limiter.limit("k")).allowed).toBe(true);
  });

  it('every decision of the memory store, single or multi-policy, from limit, decide or peek, has source "store"', async () => {
    const single = createRateLimiter({ policy: fixedWindow({ limit: 1, window: "1m" }) });
    const multi = createRateLimiter({
      policy: [fixedWindow({ limit: 1, window: "1m", name: "a" }), fixedWindow({ limit: 5, window: "1h", name: "b" })],
    });
    for (const limiter of [single, multi]) {
      const decisions = [await limiter.limit("k"), await limiter.decide("k"), await limiter.peek("k")];
      expect(decisions.map((d) => [d.allowed, d.source])).toEqual([[true, "store"], [false, "store"], [false, "store"]]);
      expect(JSON.parse(JSON.stringify(decisions[0]))).toMatchObject({ source: "store" });
    }
  });

  it("charges a cost whole or not at all", async () => {
    const now = START;
    const limiter = createRateLimiter({ policy, clock: () => now });
    expect((await limiter.limit("k", { cost: 3 })).remaining).toBe(2);
    const denied = await limiter.limit("k", { cost: 3 });
    expect(denied.allowed).toBe(false);
    expect(denied.remaining).toBe(2);
    expect((await limiter.limit("k", { cost: 2 })).allowed).toBe(true);
  });

  it("denies a cost above the limit with retryAfterMs = Infinity, charging nothing", async () => {
    const limiter = createRateLimiter({ policy, clock: () => START });
    const d = await limiter.limit("k", { cost: 6 });
    expect(d.allowed).toBe(false);
    expect(d.retryAfterMs).toBe(Infinity);
    expect(d.remaining).toBe(5);
    expect((await limiter.peek("k")).remaining).toBe(5);
  });

  it("peek charges nothing and reset clears exactly that key", async () => {
    const limiter = createRateLimiter({ policy, clock: () => START });
    await limiter.limit("user", { cost: 5 });
    await limiter.limit("user:1", { cost: 2 });
    expect((await limiter.peek("user")).allowed).toBe(false);
    expect((await limiter.peek("user")).remaining).toBe(0);
    await limiter.reset("user");
    expect((await limiter.peek("user")).remaining).toBe(5);
    expect((await limiter.peek("user:1")).remaining).toBe(3);
  });

  it("refund gives units back, never beyond a full quota", async () => {
    const limiter = createRateLimiter({ policy, clock: () => START });
    await limiter.limit("k", { cost: 4 });
    await limiter.refund("k", { cost: 2 });
    expect((await limiter.peek("k")).remaining).toBe(3);
    await limiter.refund("k", { cost: 50 });
    expect((await limiter.peek("k")).remaining).toBe(5);
  });

  it("a clock stepping backwards never grants extra quota and never throws", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.integer({ min: -120_000, max: 30_000 }), { minLength: 1, maxLength: 40 }), async (steps) => {
        let now = START;
        let latest = -Infinity;
        const jumpy = createRateLimiter({ policy, clock: () => now });
        const steady = createRateLimiter({ policy, clock: () => latest });
        for (const step of steps) {
          now += step;
          latest = Math.max(latest, now);
          // A limiter whose clock steps back is never more generous than one whose clock only moves forward.
          const a = await jumpy.limit("k");
          const b = await steady.peek("k");
          if (a.allowed) expect(b.allowed).toBe(true);
          if (a.allowed) await steady.limit("k");
        }
      }),
      { numRuns: 200 },
    );
  });
});

describe("several policies", () => {
  it("admits only when every policy admits, and a denial charges none of them", async () => {
    let now = START;
    const limiter = createRateLimiter({
      policy: [fixedWindow({ limit: 2, window: "1s", name: "second" }), fixedWindow({ limit: 3, window: "1d", name: "day" })],
      clock: () => now,
    });
    expect((await limiter.limit("k")).policy).toBe("second");
    await limiter.limit("k");
    const denied = await limiter.limit("k");
    expect(denied).toMatchObject({ allowed: false, policy: "second", remaining: 0 });
    expect(denied.policies.find((p) => p.policy === "day")).toMatchObject({ allowed: true, remaining: 1 });
    now += 1000;
    expect((await limiter.limit("k")).allowed).toBe(true);
    const dayDenied = await limiter.limit("k");
    expect(dayDenied.policy).toBe("day");
    expect(dayDenied.retryAfterMs).toBe(86_400_000 - 1000);
    // The per-second policy was not charged by that denial.
    expect(dayDenied.policies.find((p) => p.policy === "second")!.remaining).toBe(1);
  });

  it("rejects policies sharing a name", () => {
    expectError(
      () => createRateLimiter({ policy: [fixedWindow({ limit: 1, window: 1000 }), fixedWindow({ limit: 1, window: 1000 })] }),
      "INVALID_OPTION",
      "share a name",
    );
  });
});

describe("prefixes share one store without colliding", () => {
  it("keeps keys of two limiters apart", async () => {
    const store = memoryStore();
    const policy = fixedWindow({ limit: 1, window: "1m" });
    // A fixed clock: on real time a minute boundary between the calls would open a fresh window.
    const a = createRateLimiter({ policy, store, prefix: "a:", clock: () => START });
    const b = createRateLimiter({ policy, store, prefix: "a:b", clock: () => START });
    expect((await a.limit("bc")).allowed).toBe(true);
    expect((await b.limit("c")).allowed).toBe(true);
    expect((await a.limit("bc")).allowed).toBe(false);
  });
});

describe("bad options are rejected at construction, naming the option, the value and what is accepted", () => {
  it.each<[() => unknown, ...string[]]>([
    [() => tokenBucket({ capacity: -1, refillRate: 1 }), "`capacity`", "received -1", "whole number >= 1"],
    [() => tokenBucket({ capacity: 10, refillRate: Number.NaN }), "`refillRate`", "NaN", "tokens per second"],
    [() => tokenBucket({ capacity: 10, refillRate: Infinity }), "`refillRate`", "Infinity", "<= 1000000"],
    [() => fixedWindow({ limit: 10, window: 0 }), "`window`", "received 0", '"10s"'],
    [() => slidingWindow({ limit: 10, window: "ten seconds" as never }), "`window`", '"ten seconds"', '"1m"'],
    [() => slidingLog({ limit: 1.5, window: "1s" }), "`limit`", "1.5", "whole number"],
    [
      () => fixedWindow({ limit: 10, windowMS: 1000 } as never),
      "`windowMS`",
      "did you mean `window`",
      "accepted options: limit, window, name",
    ],
    [() => fixedWindow({ limit: 10, window: "1s", name: "has space" }), "`name`", '"has space"', "1 to 64 characters"],
    [() => memoryStore({ maxKeys: 0 }), "`maxKeys`", "received 0", "whole number"],
    [() => createRateLimiter({ policy: {} as never }), "`policy`", "an object", "tokenBucket()"],
    [() => createRateLimiter({ policy: [] }), "`policy`", "an array of 0", "non-empty array"],
    // A look-alike (e.g. a policy rebuilt from JSON) is not a policy: only the factories make one.
    [
      () => createRateLimiter({ policy: JSON.parse(JSON.stringify(fixedWindow({ limit: 1, window: 1 }))) }),
      "`policy`",
      "an object",
      "fixedWindow()",
    ],
    [() => createRateLimiter({ policy: fixedWindow({ limit: 1, window: 1 }), prefix: "a{b}" }), "`prefix`", '"a{b}"', "without {, }"],
    [() => createRateLimiter({ policy: fixedWindow({ limit: 1, window: 1 }), clock: 5 as never }), "`clock`", "received 5", "function"],
  ])("case %#", (fn, ...fragments) => expectError(fn, "INVALID_OPTION", ...fragments));

  it("parses durations", () => {
    expect(parseDuration("500ms")).toBe(500);
    expect(parseDuration("10s")).toBe(10_000);
    expect(parseDuration("1m")).toBe(60_000);
    expect(parseDuration("1h")).toBe(3_600_000);
    expect(parseDuration("1d")).toBe(86_400_000);
    expect(parseDuration("1.5s")).toBe(1500);
    expect(parseDuration(250)).toBe(250);
    expectError(() => parseDuration("1.0005s"), "INVALID_OPTION", "1.0005s");
    expectError(() => parseDuration(-5), "INVALID_OPTION", "-5");
  });
});

describe("token-bucket refill rates and capacities validation accepts keep the arithmetic exact", () => {
  // Beyond 2^53 µs a bucket's arrival time is no longer an exact double: refillRate 1e-300 made
  // every interval Infinity and admitted everything; huge capacities over-admitted by a token.
  it.each<[number, number]>([
    [1000, 1e-300],
    [1000, 3e-12],
    [1, 1e-15],
    [2 ** 53 - 1, 1_000_000],
  ])("capacity %d at %d per second is rejected at construction", (capacity, refillRate) => {
    expectError(() => tokenBucket({ capacity, refillRate }), "INVALID_OPTION", "`capacity`", "`refillRate`", "too large");
  });

  it("every accepted bucket admits exactly its capacity at once, then one token per interval", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(fc.integer({ min: 1, max: 50 }), fc.integer({ min: 1, max: 2 ** 51 })),
        fc.oneof(fc.double({ min: 1e-12, max: 1_000_000, noNaN: true }), fc.constantFrom(1e-300, 5e-324, 1e-9, 1_000_000)),
        fc.double({ min: 0, max: 1, noNaN: true }),
        async (capacity, refillRate, fraction) => {
          let policy: Policy;
          try {
            policy = tokenBucket({ capacity, refillRate });
          } catch (error) {
            expect((error as FloodgateError).code).toBe("INVALID_OPTION");
            return;
          }
          const interval = Math.round(policy.intervalMs * 1000);
          expect(capacity * interval).toBeLessThanOrEqual(2 ** 51);
          const now = START + fraction;
          const limiter = createRateLimiter({ policy, clock: () => now });
          const full = await limiter.limit("k", { cost: capacity });
          expect(full.allowed).toBe(true);
          expect(full.remaining).toBe(0);
          const next = await limiter.limit("k");
          expect(next.allowed).toBe(false);
          expect(next.remaining).toBe(0);
          expect(next.retryAfterMs).toBe(Math.ceil(interval / 1000));
        },
      ),
      { numRuns: 500 },
    );
  });
});

describe("bad calls throw a clear error and change no state", () => {
  it.each([
    ["", "key", '""'],
    [42, "key", "42"],
    [undefined, "key", "undefined"],
    ["\u0000x", "key", "NUL"],
  ])("limit(%j)", async (key, what, shown) => {
    const limiter = createRateLimiter({ policy: fixedWindow({ limit: 1, window: "1m" }) });
    await expect(limiter.limit(key as string)).rejects.toMatchObject({ code: "INVALID_ARGUMENT", message: expect.stringContaining(shown) });
    expect(what).toBe("key");
    expect((limiter.store as ReturnType<typeof memoryStore>).size).toBe(0);
  });

  it.each([0, -1, Number.NaN, Infinity, 1.5, "2"])("cost %j", async (cost) => {
    const limiter = createRateLimiter({ policy: fixedWindow({ limit: 5, window: "1m" }), clock: () => START });
    await limiter.limit("k");
    await expect(limiter.limit("k", { cost: cost as number })).rejects.toMatchObject({
      code: "INVALID_ARGUMENT",
      message: expect.stringContaining("cost"),
    });
    expect((await limiter.peek("k")).remaining).toBe(4);
  });

  it("null options are no options (cost 1), not a TypeError", async () => {
    const limiter = createRateLimiter({ policy: fixedWindow({ limit: 5, window: "1m" }), clock: () => START });
    const options = null as unknown as undefined;
    expect((await limiter.limit("k", options)).remaining).toBe(4);
    expect((limiter.decide("k", options) as { remaining: number }).remaining).toBe(3);
    await limiter.refund("k", options);
    expect((await limiter.peek("k")).remaining).toBe(4);
  });
});

describe("decide()", () => {
  it("answers synchronously on the memory store with the decision limit() would make", async () => {
    let now = START;
    const a = createRateLimiter({ policy: slidingWindow({ limit: 3, window: "1s" }), clock: () => now });
    const b = createRateLimiter({ policy: slidingWindow({ limit: 3, window: "1s" }), clock: () => now });
    for (let i = 0; i < 6; i++) {
      now += 150;
      const sync = a.decide("k", { cost: 1 + (i % 2) });
      expect(sync).not.toBeInstanceOf(Promise);
      expect(JSON.parse(JSON.stringify(sync))).toEqual(JSON.parse(JSON.stringify(await b.limit("k", { cost: 1 + (i % 2) }))));
    }
  });

  it("returns the store's promise for an asynchronous store, and throws on a bad argument", async () => {
    const inner = memoryStore();
    const remote = {
      name: "remote",
      consume: (...args: Parameters<typeof inner.consume>) => Promise.resolve(inner.consume(...args)),
      peek: (...args: Parameters<typeof inner.peek>) => Promise.resolve(inner.peek(...args)),
      refund: (...args: Parameters<typeof inner.refund>) => Promise.resolve(inner.refund(...args)),
      reset: (...args: Parameters<typeof inner.reset>) => Promise.resolve(inner.reset(...args)),
    };
    const limiter = createRateLimiter({ policy: fixedWindow({ limit: 1, window: "1m" }), store: remote, clock: () => START });
    const pending = limiter.decide("k");
    expect(pending).toBeInstanceOf(Promise);
    expect((await pending).allowed).toBe(true);
    expect((await limiter.decide("k")).allowed).toBe(false);
    expect(() => limiter.decide("")).toThrow(FloodgateError);
    expect(() => limiter.decide("k", { cost: 0 })).toThrow("Invalid cost");
  });
});

describe("refund(key, { charge })", () => {
  it("rejects what is not a charge of this limiter, and a cost above the charged one, changing nothing", async () => {
    const limiter = createRateLimiter({
      policy: [fixedWindow({ limit: 5, window: "1m", name: "a" }), slidingLog({ limit: 5, window: "1m", name: "b" })],
      clock: () => START,
    });
    const d = await limiter.limit("k", { cost: 2 });
    expect(d.charge).toEqual({ cost: 2, marks: [expect.any(Number), expect.any(Number)] });
    const bad = [null, 42, "x", { cost: 2 }, { cost: 2, marks: [1] }, { cost: 2, marks: [1, 1.5] }, { cost: 0, marks: d.charge!.marks }, {
      cost: 2,
      marks: ["1", "2"],
    }];
    for (const charge of bad) {
      await expect(limiter.refund("k", { charge: charge as never }), JSON.stringify(charge)).rejects.toMatchObject({
        code: "INVALID_ARGUMENT",
        message: expect.stringContaining("Invalid charge"),
      });
    }
    await expect(limiter.refund("k", { charge: d.charge, cost: 3 })).rejects.toMatchObject({
      code: "INVALID_ARGUMENT",
      message: expect.stringContaining("exceeds the charge's cost 2"),
    });
    await expect(limiter.refund("k", { charge: d.charge, cost: 0 })).rejects.toMatchObject({
      code: "INVALID_ARGUMENT",
      message: expect.stringContaining("Invalid cost"),
    });
    expect((await limiter.peek("k")).remaining).toBe(3);
    await limiter.refund("k", { charge: d.charge });
    expect((await limiter.peek("k")).remaining).toBe(5);
  });

  it("a decision's charge is plain data, in its JSON too", async () => {
    const limiter = createRateLimiter({ policy: tokenBucket({ capacity: 2, refillRate: 1 }), clock: () => START });
    const d = await limiter.limit("k");
    expect(Object.getPrototypeOf(d.charge)).toBe(Object.prototype);
    expect(d.charge).toEqual({ cost: 1, marks: [START * 1000 + 1_000_000] });
    expect(JSON.parse(JSON.stringify(d)).charge).toEqual(d.charge);
    expect(d.charge).toBe(d.charge);
  });
});
