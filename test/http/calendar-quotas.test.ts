/**
 * Monthly quotas through the HTTP layer: each customer's billing day comes from the request (a
 * rule's `policy` function picks one of the policies built at startup), and the 429's
 * `Retry-After` and `RateLimit` reset are that customer's true local cycle end, DST included.
 * The guide docs/monthly-quotas.md shows this setup.
 */
import { describe, expect, it } from "vitest";
import { calendarWindow, memoryStore, type Policy, withRateLimit } from "../../packages/core/src/index.ts";

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
