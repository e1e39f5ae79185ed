/**
 * Calendar windows in a limiter (memory store, injected clock): the period's true local end in
 * `resetAt` and `retryAfterMs` across DST changes, a new period starting from zero, the quota
 * ergonomics (peek, a credit given back into the current period, a reset on payment), blocks,
 * decisions against the reference model, and policies surviving a trip through JSON.
 */
import { describe, expect, it } from "vitest";
import { calendarWindow, createRateLimiter, fixedWindow, memoryStore, type Policy } from "../../packages/core/src/index.ts";
import { revivePolicy } from "../../packages/core/src/stores/index.ts";
import { MultiModel } from "./models.ts";

function timed(policy: Policy | Policy[], startIso: string) {
  let now = Date.parse(startIso);
  const limiter = createRateLimiter({ policy, store: memoryStore(), clock: () => now });
  return { limiter, at: (iso: string) => (now = Date.parse(iso)), now: () => now };
}

describe("calendar window decisions (memory store)", () => {
  it("a Berlin day of 23 hours: resetAt and retryAfterMs at the true local midnight", async () => {
    const { limiter, at } = timed(calendarWindow({ limit: 2, period: "day", timeZone: "Europe/Berlin" }), "2026-03-28T23:30:00Z");
    expect((await limiter.limit("k")).remaining).toBe(1);
    expect((await limiter.limit("k")).remaining).toBe(0);
    const denied = await limiter.limit("k");
    expect(denied.allowed).toBe(false);
    expect(new Date(denied.resetAt).toISOString()).toBe("2026-03-29T22:00:00.000Z");
    expect(denied.retryAfterMs).toBe(22.5 * 3_600_000);
    at("2026-03-29T21:59:59.999Z");
    expect((await limiter.limit("k")).allowed).toBe(false);
    at("2026-03-29T22:00:00Z"); // local midnight of Mar 30: a new day, from zero
    const fresh = await limiter.limit("k");
    expect(fresh.allowed).toBe(true);
    expect(fresh.remaining).toBe(1);
    expect(new Date(fresh.resetAt).toISOString()).toBe("2026-03-30T22:00:00.000Z");
  });

  it("a Lord Howe day of 24.5 hours and a New York day of 25 hours", async () => {
    const lh = timed(calendarWindow({ limit: 1, period: "day", timeZone: "Australia/Lord_Howe" }), "2026-04-04T13:00:00Z");
    await lh.limiter.limit("k");
    const denied = await lh.limiter.limit("k");
    expect(denied.retryAfterMs).toBe(24.5 * 3_600_000);
    const ny = timed(calendarWindow({ limit: 1, period: "day", timeZone: "America/New_York" }), "2026-11-01T04:00:00Z");
    await ny.limiter.limit("k");
    expect(new Date((await ny.limiter.limit("k")).resetAt).toISOString()).toBe("2026-11-02T05:00:00.000Z");
  });

  it("a billing month on the 31st renews on Feb 29 in a leap year, at Kathmandu midnight", async () => {
    const policy = calendarWindow({ limit: 3, period: "month", timeZone: "Asia/Kathmandu", billingDay: 31 });
    const { limiter, at } = timed(policy, "2024-02-10T00:00:00Z");
    await limiter.limit("acme", { cost: 3 });
    const denied = await limiter.limit("acme");
    expect(new Date(denied.resetAt).toISOString()).toBe("2024-02-28T18:15:00.000Z"); // Feb 29 00:00 +05:45
    at("2024-02-28T18:15:00Z");
    expect((await limiter.limit("acme")).remaining).toBe(2);
    expect(new Date((await limiter.peek("acme")).resetAt).toISOString()).toBe("2024-03-30T18:15:00.000Z"); // Mar 31
  });

  it("quota ergonomics: peek charges nothing, a credit goes into the current period, reset on payment", async () => {
    const { limiter, at } = timed(calendarWindow({ limit: 10_000, period: "month", timeZone: "Europe/Berlin" }), "2026-03-10T12:00:00Z");
    await limiter.limit("acme", { cost: 9_990 });
    const usage = await limiter.peek("acme");
    expect([usage.allowed, usage.remaining]).toEqual([true, 10]);
    expect((await limiter.peek("acme")).remaining).toBe(10); // peeking twice charged nothing
    await limiter.refund("acme", { cost: 500 }); // a credit: 500 calls given back this month
    expect((await limiter.peek("acme")).remaining).toBe(510);
    await limiter.refund("acme", { cost: 1_000_000 }); // never more than what was used
    expect((await limiter.peek("acme")).remaining).toBe(10_000);
    await limiter.limit("acme", { cost: 10_000 });
    expect((await limiter.limit("acme")).allowed).toBe(false);
    await limiter.reset("acme"); // the invoice is paid: a fresh quota now
    expect((await limiter.limit("acme")).remaining).toBe(9_999);
    // A credit in a later month does not reach back.
    const early = await limiter.limit("acme", { cost: 5 });
    at("2026-04-02T12:00:00Z");
    await limiter.limit("acme", { cost: 10_000 });
    await limiter.refund("acme", { charge: early.charge, cost: 5 });
    expect((await limiter.peek("acme")).remaining).toBe(0);
  });

  it("a block lasts its time, then the period's count decides again", async () => {
    const policy = calendarWindow({ limit: 2, period: "day", timeZone: "UTC", block: "1h" });
    const { limiter, at } = timed(policy, "2026-06-01T10:00:00Z");
    await limiter.limit("k", { cost: 2 });
    expect((await limiter.limit("k")).retryAfterMs).toBe(14 * 3_600_000); // the day ends after the block
    at("2026-06-02T00:30:00Z");
    expect((await limiter.limit("k")).allowed).toBe(true);
  });

  it("a fixed window beside it keeps its UTC alignment", async () => {
    const { limiter } = timed(
      [calendarWindow({ limit: 5, period: "day", timeZone: "Asia/Kathmandu" }), fixedWindow({ limit: 5, window: "1d" })],
      "2026-06-01T20:00:00Z",
    );
    const d = await limiter.limit("k");
    expect(d.policies.map((p) => new Date(p.resetAt).toISOString())).toEqual(["2026-06-02T18:15:00.000Z", "2026-06-02T00:00:00.000Z"]);
  });

  it("survives JSON: a revived policy decides alike", () => {
    const p = calendarWindow({ limit: 7, period: "week", timeZone: "America/New_York", weekStart: 0, name: "weekly" });
    const revived = revivePolicy(JSON.parse(JSON.stringify(p)));
    expect(revived).toEqual(p);
    expect(() => revivePolicy({ ...JSON.parse(JSON.stringify(p)), calendar: { period: "week", timeZone: "Mars/Olympus" } })).toThrow(
      /IANA time zone/,
    );
  });
});

describe("calendar window against the reference model (random traces across DST changes)", () => {
  const ZONES = ["Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kathmandu"];
  it.each(ZONES)("%s: every decision and remaining as the model says, days and months", async (zone) => {
    let seed = 7;
    const random = () => ((seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648) / 2_147_483_648);
    for (
      const [policy, start] of [
        [calendarWindow({ limit: 5, period: "day", timeZone: zone }), "2026-03-27T00:00:00Z"],
        [calendarWindow({ limit: 20, period: "month", timeZone: zone, billingDay: 30 }), "2025-12-15T00:00:00Z"],
      ] as const
    ) {
      let now = Date.parse(start);
      const limiter = createRateLimiter({ policy, store: memoryStore(), clock: () => now });
      const model = new MultiModel([policy]);
      const step = policy.calendar!.period === "day" ? 3_600_000 : 86_400_000;
      for (let n = 0; n < 250; n++) {
        now += Math.floor(random() * step * 2);
        const cost = 1 + Math.floor(random() * 3);
        const expected = model.limit(now, cost, n % 25 === 0);
        const got = await limiter.limit("k", { cost });
        expect([got.allowed, got.remaining], new Date(now).toISOString()).toEqual([expected.allowed, expected.remaining[0]]);
        if (!got.allowed && n % 25 === 0) expect(got.retryAfterMs).toBe(expected.retryAfterMs);
      }
    }
  });
});
