// Calendar windows decided inside a runtime (workerd, the edge runtime) with its own `Intl`: the
// fixtures' `/calendar` route (calendar-route.ts) at chosen instants across DST changes and month
// ends, against the true period ends (the instants below, checked against the IANA rules: Berlin
// springs forward on 2026-03-29 and falls back on 2026-10-25; Lord Howe Island sets its clocks back
// half an hour on 2026-04-05 and forward on 2026-10-04).
import { expect } from "vitest";

export interface CalendarCase {
  readonly name: string;
  readonly query: { timeZone: string; period: "day" | "week" | "month"; billingDay?: number };
  /** The instant decided at, and its period's first instant and end: epoch ms, and the end's local wall time. */
  readonly now: number;
  readonly start: number;
  readonly end: number;
  readonly local: string;
  /** The period after it ends here (its first decision is at `end`). */
  readonly nextEnd: number;
}

const HOUR = 3_600_000;
const utc = (y: number, m: number, d: number, h = 0, mi = 0): number => Date.UTC(y, m - 1, d, h, mi);

export const CALENDAR_CASES: readonly CalendarCase[] = [
  {
    name: "Europe/Berlin, the 23-hour day clocks spring forward",
    query: { timeZone: "Europe/Berlin", period: "day" },
    now: utc(2026, 3, 29, 10),
    start: utc(2026, 3, 28, 23),
    end: utc(2026, 3, 29, 22),
    local: "2026-03-30, 00:00",
    nextEnd: utc(2026, 3, 30, 22),
  },
  {
    name: "Europe/Berlin, the 25-hour day clocks fall back",
    query: { timeZone: "Europe/Berlin", period: "day" },
    now: utc(2026, 10, 25, 10),
    start: utc(2026, 10, 24, 22),
    end: utc(2026, 10, 25, 23),
    local: "2026-10-26, 00:00",
    nextEnd: utc(2026, 10, 26, 23),
  },
  {
    name: "Australia/Lord_Howe, the 24.5-hour day clocks go back half an hour",
    query: { timeZone: "Australia/Lord_Howe", period: "day" },
    now: utc(2026, 4, 5, 1),
    start: utc(2026, 4, 4, 13),
    end: utc(2026, 4, 5, 13, 30),
    local: "2026-04-06, 00:00",
    nextEnd: utc(2026, 4, 6, 13, 30),
  },
  {
    name: "Australia/Lord_Howe, the 23.5-hour day clocks go forward half an hour",
    query: { timeZone: "Australia/Lord_Howe", period: "day" },
    now: utc(2026, 10, 4, 1),
    start: utc(2026, 10, 3, 13, 30),
    end: utc(2026, 10, 4, 13),
    local: "2026-10-05, 00:00",
    nextEnd: utc(2026, 10, 5, 13),
  },
  {
    name: "Europe/Berlin, a billing month on the 31st: Jan 31 to Feb 28, then to Mar 31 across the spring change",
    query: { timeZone: "Europe/Berlin", period: "month", billingDay: 31 },
    now: utc(2026, 2, 15, 12),
    start: utc(2026, 1, 30, 23),
    end: utc(2026, 2, 27, 23),
    local: "2026-02-28, 00:00",
    nextEnd: utc(2026, 3, 30, 22),
  },
  {
    name: "Europe/Berlin, a billing month on the 31st in a leap year: to Feb 29",
    query: { timeZone: "Europe/Berlin", period: "month", billingDay: 31 },
    now: utc(2028, 2, 10, 12),
    start: utc(2028, 1, 30, 23),
    end: utc(2028, 2, 28, 23),
    local: "2028-02-29, 00:00",
    nextEnd: utc(2028, 3, 30, 22),
  },
];

/** Runs so far: a new key per run, so that runs on one store do not share counts. */
let run = 0;

/**
 * Runs `c` against `get` (a GET of the route at a path and query, as the runtime answers it): a
 * limit of 2 admitted at `now` with the period's end as `resetAt`, its local midnight, and the
 * headers' reset figures; the third request denied until then; the next period counted from zero.
 */
export async function checkCalendarCase(c: CalendarCase, get: (query: string) => Promise<Response>): Promise<void> {
  const key = `k${run++}-${Math.random().toString(36).slice(2)}`;
  const { timeZone, period, billingDay } = c.query;
  const at = (now: number): Promise<Response> =>
    get(
      new URLSearchParams({
        timeZone,
        period,
        ...(billingDay === undefined ? {} : { billingDay: `${billingDay}` }),
        limit: "2",
        now: `${now}`,
        key,
      })
        .toString(),
    );
  const seconds = Math.ceil((c.end - c.now) / 1000);
  for (let i = 0; i < 2; i++) {
    const response = await at(c.now);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ allowed: true, remaining: 1 - i, resetAt: c.end, local: c.local });
    expect(response.headers.get("x-ratelimit-reset")).toBe(String(c.end / 1000));
    expect(response.headers.get("ratelimit")).toBe(`"quota";r=${1 - i};t=${seconds}`);
    // The window: this period's own length (a 23-hour day, February's 28 days...).
    expect(response.headers.get("ratelimit-policy")).toBe(`"quota";q=2;w=${(c.end - c.start) / 1000}`);
  }
  const denied = await at(c.now + HOUR);
  expect(denied.status).toBe(429);
  await denied.text();
  expect(denied.headers.get("retry-after")).toBe(String(seconds - 3600));
  expect(denied.headers.get("ratelimit")).toBe(`"quota";r=0;t=${seconds - 3600}`);
  expect(denied.headers.get("ratelimit-policy")).toBe(`"quota";q=2;w=${(c.end - c.start) / 1000}`);
  // The next period, from its first instant: a count of its own, to its own end.
  const next = await at(c.end);
  expect(next.status).toBe(200);
  expect(await next.json()).toMatchObject({ allowed: true, remaining: 1, resetAt: c.nextEnd });
  expect(next.headers.get("ratelimit")).toBe(`"quota";r=1;t=${(c.nextEnd - c.end) / 1000}`);
  expect(next.headers.get("ratelimit-policy")).toBe(`"quota";q=2;w=${(c.nextEnd - c.end) / 1000}`);
}
