/**
 * Calendar windows on Redis: the period is decided on the server's clock (the script picks it
 * from the boundaries the client sends around its own clock), also when the instance's clock is
 * wrong by an hour across a local midnight; a clock off by more than half a period is refused,
 * never approximated; and on injected time the Lua decides as the memory store does across DST
 * changes (decisions, remaining, resetAt, retryAfterMs, refunds into marks, peeks).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  calendarWindow,
  createRateLimiter,
  memoryStore,
  type Policy,
  type PolicySet,
  type RateLimitStore,
} from "../../packages/core/src/index.ts";
import { periodAt } from "../../packages/core/src/algorithms/calendar/periods.ts";
import { uniquePrefix } from "../stores/store-contract.ts";
import { ioredisHarness, type RedisHarness } from "./harness.ts";

let h: RedisHarness;
beforeAll(async () => {
  h = await ioredisHarness();
});
afterAll(async () => {
  await h?.close();
});

/**
 * A zone whose next local midnight is 30 to 90 minutes away on the real clock (the whole-hour
 * zones Etc/GMT+12 to Etc/GMT-14 cover every hour), and the ms until it.
 */
function zoneNearMidnight(): { zone: string; untilMs: number } {
  for (let offset = -12; offset <= 14; offset++) {
    const zone = offset === 0 ? "UTC" : `Etc/GMT${offset > 0 ? "-" : "+"}${Math.abs(offset)}`;
    const day = periodAt({ period: "day", timeZone: zone, billingDay: 1, weekStart: 1 }, Date.now());
    const untilMs = day.end - Date.now();
    if (untilMs >= 30 * 60_000 && untilMs < 90 * 60_000) return { zone, untilMs };
  }
  throw new Error("no whole-hour zone has its midnight 30 to 90 minutes away");
}

describe("calendar window on the server's clock", () => {
  it("an instance whose clock is past the local midnight still counts in the server's day", async () => {
    const { zone, untilMs } = zoneNearMidnight();
    const skew = untilMs + 10 * 60_000; // the instance believes the next day began 10 minutes ago
    const policy = calendarWindow({ limit: 3, period: "day", timeZone: zone });
    const clock = () => Date.now() + skew;
    const serverDayEnd = periodAt(policy.calendar!, Date.now()).end;

    const prefix = uniquePrefix();
    const limiter = createRateLimiter({ policy, store: h.store("server"), prefix, clock });
    for (let i = 0; i < 3; i++) expect((await limiter.limit("acme")).allowed).toBe(true);
    const denied = await limiter.limit("acme");
    expect(denied.allowed).toBe(false);
    expect(denied.resetAt).toBe(serverDayEnd); // the server's midnight, earlier than the instance's clock
    // A second instance with a right clock shares the same day's count.
    const right = createRateLimiter({ policy, store: h.store("server"), prefix });
    expect((await right.peek("acme")).remaining).toBe(0);

    // For contrast: on the instance's own clock (memory, or Redis on local time) the count starts
    // in the next day.
    for (const store of [memoryStore(), h.store("local")] as RateLimitStore[]) {
      const local = createRateLimiter({ policy, store, prefix: uniquePrefix(), clock });
      const d = await local.limit("acme");
      expect(d.remaining).toBe(2);
      expect(d.resetAt).toBe(periodAt(policy.calendar!, clock()).end);
      expect(d.resetAt).toBeGreaterThan(serverDayEnd);
    }
  });

  it("refuses a clock more than half a period off the server's, with a clear error", async () => {
    const policy = calendarWindow({ limit: 3, period: "day", timeZone: "Europe/Berlin" });
    const set: PolicySet = { prefix: uniquePrefix(), policies: [policy] };
    const store = h.store("server", { denyCache: false });
    await expect(Promise.resolve(store.consume(set, "k", 1, Date.now() + 3 * 86_400_000))).rejects.toThrow(
      /calendar window: the server's clock .* is outside the periods the client sent/,
    );
    expect(await h.admin.keys(`${set.prefix}*`)).toEqual([]); // nothing written
  });
});

describe("calendar window: Redis Lua decides as the memory store (injected time across DST changes)", () => {
  const CASES: [string, Policy, string][] = [
    ["Berlin days", calendarWindow({ limit: 4, period: "day", timeZone: "Europe/Berlin" }), "2026-03-28T12:00:00Z"],
    ["Lord Howe days", calendarWindow({ limit: 4, period: "day", timeZone: "Australia/Lord_Howe" }), "2026-04-03T12:00:00Z"],
    [
      "New York weeks from Sunday",
      calendarWindow({ limit: 9, period: "week", timeZone: "America/New_York", weekStart: 0 }),
      "2026-10-20T12:00:00Z",
    ],
    [
      "Kathmandu months on the 31st",
      calendarWindow({ limit: 12, period: "month", timeZone: "Asia/Kathmandu", billingDay: 31 }),
      "2024-01-15T00:00:00Z",
    ],
  ];

  it.each(CASES)("%s", async (_, policy, startIso) => {
    let seed = 11;
    const random = () => ((seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648) / 2_147_483_648);
    let now = Date.parse(startIso);
    const clock = () => now;
    const mem = createRateLimiter({ policy, store: memoryStore(), clock });
    const redis = createRateLimiter({ policy, store: h.store("local", { denyCache: false }), prefix: uniquePrefix(), clock });
    const span = policy.calendar!.period === "day" ? 3_600_000 : policy.calendar!.period === "week" ? 12 * 3_600_000 : 2 * 86_400_000;
    const charges: [unknown, unknown][] = [];
    for (let n = 0; n < 120; n++) {
      now += Math.floor(random() * span);
      const cost = 1 + Math.floor(random() * 3);
      const op = random();
      if (op < 0.15 && charges.length > 0) {
        const [a, b] = charges[Math.floor(random() * charges.length)]!;
        await mem.refund("k", { charge: a as never, cost: 1 });
        await redis.refund("k", { charge: b as never, cost: 1 });
      } else if (op < 0.25) {
        const [a, b] = [await mem.peek("k"), await redis.peek("k")];
        expect(strip(b)).toEqual(strip(a));
      } else {
        const [a, b] = [await mem.limit("k", { cost }), await redis.limit("k", { cost })];
        expect(strip(b), new Date(now).toISOString()).toEqual(strip(a));
        if (a.allowed) charges.push([a.charge, b.charge]);
      }
    }
  });
});

const strip = (d: { allowed: boolean; remaining: number; resetAt: number; retryAfterMs: number }) => ({
  allowed: d.allowed,
  remaining: d.remaining,
  resetAt: d.resetAt,
  retryAfterMs: d.retryAfterMs,
});
