/**
 * The playground's calendar panel: the periods of a `calendarWindow` over one local month, found by
 * the real engine (a limiter on simulated time: a period's end is the `resetAt` a peek reports
 * inside it, and the next period starts there), with each period's length, so a DST change shows
 * as a day of 23 or 25 hours (23.5 or 24.5 on Lord Howe Island).
 */
import { calendarWindow, createRateLimiter, memoryStore } from "@floodgate/core";

/** One period: its local date, its first instant and its length in hours. */
export interface CalendarRow {
  readonly label: string;
  readonly startMs: number;
  readonly hours: number;
}

/** The zones the panel offers: DST of an hour and of half an hour, and an offset of :45. */
export const CALENDAR_ZONES = ["Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kathmandu", "UTC"] as const;

/** The end of each period of `period` in `timeZone` containing an instant, as the engine reports it. */
function periodEnds(timeZone: string, period: "day" | "month", billingDay: number): (ms: number) => Promise<number> {
  let now = 0;
  const limiter = createRateLimiter({
    policy: calendarWindow({ limit: 1, period, timeZone, ...(period === "month" ? { billingDay } : {}) }),
    store: memoryStore(),
    clock: () => now,
  });
  return async (ms) => {
    now = ms;
    return (await limiter.peek("k")).resetAt;
  };
}

/** The local days of month `month` (1-12) of `year` in `timeZone`, and the billing cycle on `billingDay` containing its 15th. */
export async function calendarMonth(
  timeZone: string,
  year: number,
  month: number,
  billingDay = 1,
): Promise<{ days: CalendarRow[]; cycle: CalendarRow }> {
  const label = new Intl.DateTimeFormat("en-CA", {
    timeZone,
    year: "numeric",
    month: "2-digit",
    day: "2-digit",
    hour: "2-digit",
    minute: "2-digit",
    hourCycle: "h23",
  });
  const dayEnd = periodEnds(timeZone, "day", 1);
  const ym = `${year}-${String(month).padStart(2, "0")}`;
  // Every zone's midnight lies within 14 hours of UTC's: start a day early and walk forward.
  let start = await dayEnd(Date.UTC(year, month - 1, 1) - 24 * 3_600_000);
  const days: CalendarRow[] = [];
  for (let n = 0; n < 33; n++) {
    const end = await dayEnd(start);
    const text = label.format(start);
    if (text.startsWith(ym)) days.push({ label: text, startMs: start, hours: (end - start) / 3_600_000 });
    start = end;
  }
  const cycleEnd = periodEnds(timeZone, "month", billingDay);
  const mid = Date.UTC(year, month - 1, 15, 12);
  let cycleStart = mid - 40 * 86_400_000;
  for (let end = await cycleEnd(cycleStart); end <= mid; end = await cycleEnd(cycleStart)) cycleStart = end;
  const end = await cycleEnd(mid);
  return { days, cycle: { label: label.format(cycleStart), startMs: cycleStart, hours: (end - cycleStart) / 3_600_000 } };
}
