import type { CalendarSpec } from "../../policy.ts";
import { formatterOf, instantOf, wallOf } from "./zone.ts";

/*
 * Calendar periods: a local day, week or month (a billing cycle anchored on a day of the month)
 * in an IANA time zone, as the instants [start, end) it spans. A day is 23 or 25 hours across a
 * DST change (23.5 or 24.5 on Lord Howe Island); a month renews on its billing day, or on the last
 * day of a month too short for it (a cycle anchored on the 31st renews on Jan 31, Feb 28 or 29,
 * Mar 31, Apr 30...), at local midnight, or at the first instant after a midnight that does not
 * exist.
 */

/** What a calendar policy counts in: see `calendarWindow()`. */
export type { CalendarSpec };

/** One period: its first instant and the first instant after it, epoch ms. */
export interface Span {
  readonly start: number;
  readonly end: number;
}

const DAY_MS = 86_400_000;

/** Days in month `m` (0-11) of year `y`. */
const daysIn = (y: number, m: number): number => new Date(Date.UTC(y, m + 1, 0)).getUTCDate();

/** The local day number (days since 1970-01-01) of the cycle start in month `m` (any integer) of year `y`. */
function anchorDay(y: number, m: number, billingDay: number): number {
  const first = Date.UTC(y, m, 1);
  const d = new Date(first);
  return Math.floor(first / DAY_MS) + Math.min(billingDay, daysIn(d.getUTCFullYear(), d.getUTCMonth())) - 1;
}

/** The local day number the period containing local day `day` starts on. */
function startDay(spec: CalendarSpec, day: number): number {
  if (spec.period === "day") return day;
  const date = new Date(day * DAY_MS);
  if (spec.period === "week") return day - ((date.getUTCDay() - spec.weekStart + 7) % 7);
  const y = date.getUTCFullYear(), m = date.getUTCMonth();
  const here = anchorDay(y, m, spec.billingDay);
  return day >= here ? here : anchorDay(y, m - 1, spec.billingDay);
}

/** The local day number the period after the one starting on `start` starts on. */
function nextDay(spec: CalendarSpec, start: number): number {
  if (spec.period === "day") return start + 1;
  if (spec.period === "week") return start + 7;
  const date = new Date(start * DAY_MS);
  // A cycle starting on a clamped day (Feb 28 of a cycle on the 31st) belongs to its month.
  return anchorDay(date.getUTCFullYear(), date.getUTCMonth() + 1, spec.billingDay);
}

/** The spans of one spec computed so far (a few around the clock), newest last. */
interface Spans {
  readonly f: Intl.DateTimeFormat;
  last: Span | undefined;
  readonly recent: Span[];
}

const CACHE = new Map<string, Spans>();
const KEPT = 8;

/** The cache key of a spec. */
export const specKey = (spec: CalendarSpec): string => `${spec.timeZone}|${spec.period}|${spec.billingDay}|${spec.weekStart}`;

function spansOf(spec: CalendarSpec): Spans {
  const key = specKey(spec);
  let spans = CACHE.get(key);
  if (spans === undefined) {
    const f = formatterOf(spec.timeZone);
    if (f === undefined) throw new RangeError(`Unknown time zone ${spec.timeZone}`);
    spans = { f, last: undefined, recent: [] };
    CACHE.set(key, spans);
  }
  return spans;
}

function compute(spec: CalendarSpec, f: Intl.DateTimeFormat, ms: number): Span {
  let s = startDay(spec, Math.floor(wallOf(f, ms) / DAY_MS));
  let start = instantOf(f, s * DAY_MS);
  // A local midnight that occurs twice, or a day that does not exist, can put the instant
  // before the start its wall date names: the period before, then.
  if (ms < start) {
    s = startDay(spec, s - 1);
    start = instantOf(f, s * DAY_MS);
  }
  let e = nextDay(spec, s);
  let end = instantOf(f, e * DAY_MS);
  while (ms >= end) {
    start = end;
    e = nextDay(spec, e);
    end = instantOf(f, e * DAY_MS);
  }
  return { start, end };
}

/**
 * The period of `spec` containing instant `ms` (epoch ms). Cached per spec: the clock's period
 * (and a few around it) is found without formatting a date.
 */
export function periodAt(spec: CalendarSpec, ms: number): Span {
  const spans = spansOf(spec);
  const last = spans.last;
  if (last !== undefined && ms >= last.start && ms < last.end) return last;
  for (const span of spans.recent) {
    if (ms >= span.start && ms < span.end) return (spans.last = span);
  }
  const span = compute(spec, spans.f, ms);
  if (spans.recent.length >= KEPT) spans.recent.shift();
  spans.recent.push(span);
  return (spans.last = span);
}

/** The periods `count` before and after the one containing `ms`, in order (for tests and docs). */
export function periodsAround(spec: CalendarSpec, ms: number, before: number, after: number): Span[] {
  let first = periodAt(spec, ms);
  for (let n = 0; n < before; n++) first = periodAt(spec, first.start - 1);
  const list = [first];
  for (let n = 0; n < before + after; n++) list.push(periodAt(spec, list[list.length - 1]!.end));
  return list;
}
