/**
 * The playground's calendar panel, in Node: the month it shows is the engine's, DST days included.
 */
import { describe, expect, it } from "vitest";
import { calendarMonth } from "../../docs/playground/calendar.ts";

describe("playground calendar panel", () => {
  it("March 2026 in Berlin: 31 local days, Mar 29 of 23 hours; the cycle on the 31st from Feb 28", async () => {
    const { days, cycle } = await calendarMonth("Europe/Berlin", 2026, 3, 31);
    expect(days.length).toBe(31);
    expect(days.filter((d) => d.hours !== 24)).toEqual([{
      label: "2026-03-29, 00:00",
      startMs: Date.parse("2026-03-28T23:00:00Z"),
      hours: 23,
    }]);
    expect(cycle).toEqual({ label: "2026-02-28, 00:00", startMs: Date.parse("2026-02-27T23:00:00Z"), hours: 31 * 24 - 1 });
  });

  it("October 2026 on Lord Howe Island: a day of 23.5 hours", async () => {
    const { days } = await calendarMonth("Australia/Lord_Howe", 2026, 10);
    expect(days.length).toBe(31);
    expect(days.filter((d) => d.hours !== 24).map((d) => [d.label, d.hours])).toEqual([["2026-10-04, 00:00", 23.5]]);
  });
});
