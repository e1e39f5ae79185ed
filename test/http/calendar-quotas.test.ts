/**
 * Monthly quotas through the HTTP layer: each customer's billing day comes from the request (a
 * rule's `policy` function picks one of the policies built at startup), and the 429's
 * `Retry-After` and `RateLimit` reset are that customer's true local cycle end, DST included.
 * The guide docs/monthly-quotas.md shows this setup.
 */
import { describe, expect, it } from "vitest";
import { calendarWindow, fixedWindow, memoryStore, type Policy, withRateLimit } from "../../packages/core/src/index.ts";

const CUSTOMERS: Record<string, { plan: "free" | "pro"; billingDay: number; timeZone: string }> = {
  acme: { plan: "free", billingDay: 31, timeZone: "Europe/Berlin" },
  globex: { plan: "free", billingDay: 15, timeZone: "Europe/Berlin" },
  initech: { plan: "pro", billingDay: 1, timeZone: "America/New_York" },
};

const LIMITS = { free: 3, pro: 5 };
const POLICIES = new Map<string, Policy>();
/** One policy per (plan, zone, billing day), built once and reused. */
function monthly(plan: "free" | "pro", timeZone: string, billingDay: number): Policy {
  const id = `${plan}/${timeZone}/${billingDay}`;
  let p = POLICIES.get(id);
  if (p === undefined) POLICIES.set(id, p = calendarWindow({ limit: LIMITS[plan], period: "month", timeZone, billingDay, name: plan }));
  return p;
}

describe("a monthly quota per customer, billing day from the request", () => {
  it("each customer counts in their own cycle and is told their own cycle end", async () => {
    let now = Date.parse("2026-03-20T12:00:00Z");
    const handler = withRateLimit(() => new Response("ok"), {
      key: (req) => req.header("x-customer") ?? undefined,
      policy: (req) => {
        const c = CUSTOMERS[req.header("x-customer") ?? ""];
        return c === undefined ? undefined : monthly(c.plan, c.timeZone, c.billingDay);
      },
      store: memoryStore(),
      clock: () => now,
      headers: ["draft-11", "legacy"],
    });
    const call = (customer: string) => handler(new Request("http://api.test/v1", { headers: { "x-customer": customer } }));

    for (const customer of ["acme", "globex"]) {
      for (let i = 0; i < 3; i++) expect((await call(customer)).status).toBe(200);
    }
    // acme's cycle (billing day 31) started Feb 28 and ends at Berlin midnight starting Mar 31:
    // 2026-03-30T22:00Z (CEST since Mar 29). globex's ends at midnight starting Apr 15.
    const acme = await call("acme");
    expect(acme.status).toBe(429);
    const acmeEnd = Date.parse("2026-03-30T22:00:00Z");
    expect(acme.headers.get("retry-after")).toBe(String(Math.ceil((acmeEnd - now) / 1000)));
    expect(acme.headers.get("x-ratelimit-reset")).toBe(String(acmeEnd / 1000));
    const globex = await call("globex");
    expect(globex.headers.get("retry-after")).toBe(String(Math.ceil((Date.parse("2026-04-14T22:00:00Z") - now) / 1000)));
    expect((await call("initech")).status).toBe(200);

    now = acmeEnd; // acme's new cycle; globex's goes on
    expect((await call("acme")).status).toBe(200);
    expect((await call("globex")).status).toBe(429);
  });

  it("reset on payment and a credit, through the handle", async () => {
    const now = Date.parse("2026-03-20T12:00:00Z");
    const handler = withRateLimit(() => new Response("ok"), {
      key: (req) => req.header("x-customer") ?? undefined,
      policy: monthly("free", "Europe/Berlin", 31),
      store: memoryStore(),
      clock: () => now,
    });
    const call = () => handler(new Request("http://api.test/v1", { headers: { "x-customer": "acme" } }));
    for (let i = 0; i < 3; i++) await call();
    expect((await call()).status).toBe(429);
    expect((await handler.peek("acme")).remaining).toBe(0); // usage, read without charging
    await handler.limiterFor().refund("acme", { cost: 1 }); // a credit of one call this cycle
    expect((await call()).status).toBe(200);
    expect((await call()).status).toBe(429);
    await handler.reset("acme"); // paid: a fresh quota
    expect((await handler.peek("acme")).remaining).toBe(3);
  });
});

describe("RateLimit-Policy's w: the length of the period the decision counts in", () => {
  const DAY = 86_400;
  /** One rule over `policies`, its headers in `formats`, decided at the instant `at` holds. */
  function rule(policies: Policy | Policy[], formats: ("draft-6" | "draft-7" | "draft-11")[]) {
    const at = { now: 0 };
    const handler = withRateLimit(() => new Response("ok"), {
      key: () => "k",
      policy: policies,
      store: memoryStore(),
      clock: () => at.now,
      headers: formats,
    });
    const policyAt = async (iso: string): Promise<string | null> => {
      at.now = Date.parse(iso);
      const response = await handler(new Request("http://api.test/v1"));
      await response.text();
      return response.headers.get("ratelimit-policy");
    };
    return policyAt;
  }

  it("a day: 23 or 25 hours across Berlin's DST changes, 24.5 on Lord Howe Island, 24 otherwise", async () => {
    const berlin = rule(calendarWindow({ limit: 100, period: "day", timeZone: "Europe/Berlin", name: "daily" }), ["draft-11"]);
    expect(await berlin("2026-03-29T10:00:00Z")).toBe(`"daily";q=100;w=${23 * 3600}`);
    // The same rule, the next day: the text follows the period.
    expect(await berlin("2026-03-30T10:00:00Z")).toBe(`"daily";q=100;w=${DAY}`);
    expect(await berlin("2026-10-25T10:00:00Z")).toBe(`"daily";q=100;w=${25 * 3600}`);
    const lordHowe = rule(calendarWindow({ limit: 100, period: "day", timeZone: "Australia/Lord_Howe", name: "daily" }), ["draft-11"]);
    expect(await lordHowe("2026-04-05T01:00:00Z")).toBe(`"daily";q=100;w=${24.5 * 3600}`);
    expect(await lordHowe("2026-10-04T01:00:00Z")).toBe(`"daily";q=100;w=${23.5 * 3600}`);
  });

  it("a month: February's 28 or 29 days, a billing cycle as it falls (Feb 28 to Mar 31 is 31 days less the hour DST takes)", async () => {
    const calendarMonth = rule(calendarWindow({ limit: 100, period: "month", timeZone: "Europe/Berlin", name: "m" }), ["draft-11"]);
    expect(await calendarMonth("2026-02-10T12:00:00Z")).toBe(`"m";q=100;w=${28 * DAY}`);
    expect(await calendarMonth("2028-02-10T12:00:00Z")).toBe(`"m";q=100;w=${29 * DAY}`);
    expect(await calendarMonth("2026-01-10T12:00:00Z")).toBe(`"m";q=100;w=${31 * DAY}`);
    const billing = rule(calendarWindow({ limit: 100, period: "month", timeZone: "Europe/Berlin", billingDay: 31, name: "m" }), [
      "draft-11",
    ]);
    expect(await billing("2026-02-10T12:00:00Z")).toBe(`"m";q=100;w=${28 * DAY}`); // Jan 31 to Feb 28
    expect(await billing("2026-03-10T12:00:00Z")).toBe(`"m";q=100;w=${31 * DAY - 3600}`); // Feb 28 to Mar 31
    expect(await billing("2026-04-10T12:00:00Z")).toBe(`"m";q=100;w=${30 * DAY}`); // Mar 31 to Apr 30
  });

  it("a week across a DST change, on a denial too; draft-6 and draft-7 write the same w", async () => {
    const week = calendarWindow({ limit: 1, period: "week", timeZone: "Europe/Berlin", name: "w" });
    for (const format of ["draft-6", "draft-7"] as const) {
      const policyAt = rule(week, [format]);
      // The week from Monday Mar 23 to Monday Mar 30, 2026 loses an hour on Sunday the 29th.
      expect(await policyAt("2026-03-25T12:00:00Z")).toBe(`1;w=${7 * DAY - 3600}`);
      expect(await policyAt("2026-03-26T12:00:00Z")).toBe(`1;w=${7 * DAY - 3600}`); // denied
      expect(await policyAt("2026-04-01T12:00:00Z")).toBe(`1;w=${7 * DAY}`);
    }
  });

  it("beside a fixed-length policy: each policy's own w", async () => {
    const policyAt = rule([
      fixedWindow({ limit: 10, window: "1h", name: "hourly" }),
      calendarWindow({ limit: 100, period: "day", timeZone: "Europe/Berlin", name: "daily" }),
    ], ["draft-11"]);
    expect(await policyAt("2026-10-25T10:00:00Z")).toBe(`"hourly";q=10;w=3600, "daily";q=100;w=${25 * 3600}`);
    expect(await policyAt("2026-10-26T10:00:00Z")).toBe(`"hourly";q=10;w=3600, "daily";q=100;w=${DAY}`);
  });
});
