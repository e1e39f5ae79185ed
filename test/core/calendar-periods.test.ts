/**
 * Calendar periods: local days, weeks and billing months in IANA time zones, against instants
 * worked out by hand from the zones' rules (DST changes of an hour, Lord Howe Island's half hour,
 * Nepal's +05:45, a change at midnight), and against the reference model, which names periods by
 * local dates and never computes a boundary.
 */
import { describe, expect, it } from "vitest";
import { type CalendarSpec, calendarWindow } from "../../packages/core/src/index.ts";
import { periodAt } from "../../packages/core/src/algorithms/calendar/periods.ts";
import { CalendarWindowModel } from "./models.ts";

const spec = (timeZone: string, period: CalendarSpec["period"], billingDay = 1, weekStart = 1): CalendarSpec => ({
  timeZone,
  period,
  billingDay,
  weekStart,
});

/** [zone, period, billing day, an instant inside, expected start, expected end, hours] */
const CASES: [string, CalendarSpec["period"], number, string, string, string, number][] = [
  // Berlin: clocks forward 02:00 → 03:00 on Mar 29 2026, back 03:00 → 02:00 on Oct 25 2026.
  ["Europe/Berlin", "day", 1, "2026-03-29T12:00:00Z", "2026-03-28T23:00:00Z", "2026-03-29T22:00:00Z", 23],
  ["Europe/Berlin", "day", 1, "2026-10-25T12:00:00Z", "2026-10-24T22:00:00Z", "2026-10-25T23:00:00Z", 25],
  ["Europe/Berlin", "day", 1, "2026-03-28T23:00:00Z", "2026-03-28T23:00:00Z", "2026-03-29T22:00:00Z", 23],
  ["Europe/Berlin", "day", 1, "2026-03-28T22:59:59.999Z", "2026-03-27T23:00:00Z", "2026-03-28T23:00:00Z", 24],
  // New York: Mar 8 and Nov 1 2026.
  ["America/New_York", "day", 1, "2026-03-08T12:00:00Z", "2026-03-08T05:00:00Z", "2026-03-09T04:00:00Z", 23],
  ["America/New_York", "day", 1, "2026-11-01T12:00:00Z", "2026-11-01T04:00:00Z", "2026-11-02T05:00:00Z", 25],
  // Lord Howe Island: +10:30, and +11:00 from 02:00 on the first Sunday of October to 02:00 on the first Sunday of April.
  ["Australia/Lord_Howe", "day", 1, "2026-10-04T01:00:00Z", "2026-10-03T13:30:00Z", "2026-10-04T13:00:00Z", 23.5],
  ["Australia/Lord_Howe", "day", 1, "2026-04-05T01:00:00Z", "2026-04-04T13:00:00Z", "2026-04-05T13:30:00Z", 24.5],
  // Kathmandu, +05:45 all year: months start at 18:15 UTC the day before.
  ["Asia/Kathmandu", "month", 1, "2026-02-10T00:00:00Z", "2026-01-31T18:15:00Z", "2026-02-28T18:15:00Z", 28 * 24],
  ["Asia/Kathmandu", "day", 1, "2026-02-10T18:14:59Z", "2026-02-09T18:15:00Z", "2026-02-10T18:15:00Z", 24],
  // Santiago: clocks forward at midnight (24:00 Sep 5 → 01:00 Sep 6 2026): the day starts at the change.
  ["America/Santiago", "day", 1, "2026-09-06T12:00:00Z", "2026-09-06T04:00:00Z", "2026-09-07T03:00:00Z", 23],
  // Billing day 31 in a leap year: Jan 31, Feb 29, Mar 31 (a DST day inside), Apr 30.
  ["Europe/Berlin", "month", 31, "2024-02-15T00:00:00Z", "2024-01-30T23:00:00Z", "2024-02-28T23:00:00Z", 29 * 24],
  ["Europe/Berlin", "month", 31, "2024-03-15T00:00:00Z", "2024-02-28T23:00:00Z", "2024-03-30T23:00:00Z", 31 * 24],
  ["Europe/Berlin", "month", 31, "2024-04-15T00:00:00Z", "2024-03-30T23:00:00Z", "2024-04-29T22:00:00Z", 30 * 24 - 1],
  // ... and in a common year: Feb 28.
  ["Europe/Berlin", "month", 31, "2025-03-01T00:00:00Z", "2025-02-27T23:00:00Z", "2025-03-30T22:00:00Z", 31 * 24 - 1],
  ["UTC", "month", 29, "2025-02-28T12:00:00Z", "2025-02-28T00:00:00Z", "2025-03-29T00:00:00Z", 29 * 24],
  ["UTC", "month", 29, "2025-02-27T12:00:00Z", "2025-01-29T00:00:00Z", "2025-02-28T00:00:00Z", 30 * 24],
  // Leap day itself, on a cycle of the 29th.
  ["UTC", "month", 29, "2024-02-29T00:00:00Z", "2024-02-29T00:00:00Z", "2024-03-29T00:00:00Z", 29 * 24],
];

describe("calendar periods (hand-worked instants)", () => {
  it.each(CASES)("%s %s (billing day %i) at %s", (zone, period, billingDay, at, start, end, hours) => {
    const span = periodAt(spec(zone, period, billingDay), Date.parse(at));
    expect(new Date(span.start).toISOString()).toBe(new Date(start).toISOString());
    expect(new Date(span.end).toISOString()).toBe(new Date(end).toISOString());
    expect((span.end - span.start) / 3_600_000).toBe(hours);
  });

  it("weeks start on the day asked for, local midnight, across a DST change", () => {
    // New York, weeks from Sunday: Mar 8 2026 is a Sunday, and the day clocks go forward.
    const sunday = periodAt(spec("America/New_York", "week", 1, 0), Date.parse("2026-03-10T12:00:00Z"));
    expect([new Date(sunday.start).toISOString(), new Date(sunday.end).toISOString()]).toEqual([
      "2026-03-08T05:00:00.000Z",
      "2026-03-15T04:00:00.000Z",
    ]);
    const monday = periodAt(spec("America/New_York", "week"), Date.parse("2026-03-10T12:00:00Z"));
    expect(new Date(monday.start).toISOString()).toBe("2026-03-09T04:00:00.000Z");
  });
});

describe("calendar periods against the reference model (names by local date, no boundary computed)", () => {
  const ZONES = ["Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kathmandu", "America/Santiago", "Pacific/Chatham"];
  const SPECS = ZONES.flatMap((
    z,
  ) => [
    spec(z, "day"),
    spec(z, "week"),
    spec(z, "week", 1, 0),
    spec(z, "month"),
    spec(z, "month", 31),
    spec(z, "month", 30),
    spec(z, "month", 29),
  ]);

  it.each(SPECS.map((s) => [`${s.timeZone} ${s.period} ${s.billingDay}/${s.weekStart}`, s] as const))(
    "%s: every period begins and ends where the local period's name changes",
    (_, s) => {
      const model = new CalendarWindowModel(calendarWindow({ limit: 1, ...options(s) }));
      // Days over one year (every DST change of these zones), weeks and months over three.
      let t = Date.parse(s.period === "day" ? "2026-01-01T00:00:00Z" : "2024-01-01T00:00:00Z");
      const stop = Date.parse("2026-12-31T00:00:00Z");
      while (t < stop) {
        const span = periodAt(s, t);
        expect(span.start).toBeLessThanOrEqual(t);
        expect(span.end).toBeGreaterThan(t);
        const name = model.name(span.start);
        expect(model.name(span.start - 1)).not.toBe(name);
        expect(model.name(span.end - 1)).toBe(name);
        expect(model.name(span.end)).not.toBe(name);
        t = span.end;
      }
    },
  );
});

function options(s: CalendarSpec) {
  return {
    period: s.period,
    timeZone: s.timeZone,
    ...(s.period === "month" ? { billingDay: s.billingDay } : {}),
    ...(s.period === "week" ? { weekStart: s.weekStart } : {}),
  };
}

describe("calendarWindow() options", () => {
  it("names an unknown time zone and says what is accepted", () => {
    expect(() => calendarWindow({ limit: 10, period: "month", timeZone: "Europe/Berln" })).toThrow(
      /calendarWindow\(\): invalid option `timeZone`: received "Europe\/Berln"; expected an IANA time zone such as Europe\/Berlin/,
    );
    expect(() => calendarWindow({ limit: 10, period: "day", timeZone: "+02:00" })).toThrow(/invalid option `timeZone`/);
  });

  it("takes a billing day from 1 to 31, for months only", () => {
    expect(() => calendarWindow({ limit: 10, period: "month", timeZone: "UTC", billingDay: 0 })).toThrow(
      /invalid option `billingDay`: received 0; expected a day of the month from 1 to 31/,
    );
    expect(() => calendarWindow({ limit: 10, period: "month", timeZone: "UTC", billingDay: 32 })).toThrow(/billingDay/);
    expect(() => calendarWindow({ limit: 10, period: "day", timeZone: "UTC", billingDay: 5 })).toThrow(
      /`billingDay` applies to a period of "month" only/,
    );
    expect(() => calendarWindow({ limit: 10, period: "year" as "day", timeZone: "UTC" })).toThrow(/expected "day", "week" or "month"/);
  });

  it("builds a policy naming its calendar", () => {
    const p = calendarWindow({ limit: 10_000, period: "month", timeZone: "Europe/Berlin", billingDay: 31 });
    expect(p).toMatchObject({ kind: "calendar-window", name: "10000-per-month", limit: 10_000 });
    expect(p.calendar).toEqual({ period: "month", timeZone: "Europe/Berlin", billingDay: 31, weekStart: 1 });
  });
});
