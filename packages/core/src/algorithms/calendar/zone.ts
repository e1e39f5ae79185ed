/*
 * Local wall-clock time in an IANA time zone, from the runtime's own time-zone data (`Intl`):
 * no time-zone library. Node, Deno, Bun, workerd, edge runtimes and browsers all carry the IANA
 * database in their `Intl.DateTimeFormat`.
 */

const FORMATTERS = new Map<string, Intl.DateTimeFormat>();

/** The formatter of `zone` (cached), or undefined when the runtime does not know the zone. */
export function formatterOf(zone: string): Intl.DateTimeFormat | undefined {
  let f = FORMATTERS.get(zone);
  if (f === undefined) {
    try {
      f = new Intl.DateTimeFormat("en-US", {
        timeZone: zone,
        hourCycle: "h23",
        year: "numeric",
        month: "numeric",
        day: "numeric",
        hour: "numeric",
        minute: "numeric",
        second: "numeric",
      });
    } catch {
      return undefined;
    }
    FORMATTERS.set(zone, f);
  }
  return f;
}

/** Whether `zone` is a time zone this runtime knows, by an IANA name (not an offset such as "+02:00"). */
export function isTimeZone(zone: unknown): boolean {
  return typeof zone === "string" && /^[A-Za-z][A-Za-z0-9_+\-/]*$/.test(zone) && formatterOf(zone) !== undefined;
}

/**
 * The wall-clock time at instant `ms` in the zone of `f`, as the epoch ms of that wall time read
 * as UTC (whole seconds; the zone's offset is then `wall - ms`).
 */
export function wallOf(f: Intl.DateTimeFormat, ms: number): number {
  const s = Math.floor(ms / 1000) * 1000;
  let y = 0, mo = 0, d = 0, h = 0, mi = 0, se = 0;
  for (const part of f.formatToParts(s)) {
    const v = Number(part.value);
    switch (part.type) {
      case "year":
        y = v;
        break;
      case "month":
        mo = v;
        break;
      case "day":
        d = v;
        break;
      case "hour":
        h = v === 24 ? 0 : v;
        break;
      case "minute":
        mi = v;
        break;
      case "second":
        se = v;
        break;
    }
  }
  return Date.UTC(y, mo - 1, d, h, mi, se);
}

const DAY_MS = 86_400_000;

/**
 * The first instant whose wall-clock time is `wall` (epoch ms of a wall time read as UTC) in the
 * zone of `f`. A wall time that occurs twice (clocks set back across it) is its first
 * occurrence; one that does not occur (clocks set forward across it, as where a DST change is at
 * midnight) is the first instant after the gap, the instant of the change.
 */
export function instantOf(f: Intl.DateTimeFormat, wall: number): number {
  // The offsets in force a day either side: any instant showing `wall` has one of them
  // (one change at most in two days, which every zone's history keeps to).
  const before = wallOf(f, wall - DAY_MS) - (wall - DAY_MS);
  const after = wallOf(f, wall + DAY_MS) - (wall + DAY_MS);
  let found = Infinity;
  for (const offset of before === after ? [before] : [before, after]) {
    const t = wall - offset;
    if (wallOf(f, t) - t === offset && t < found) found = t;
  }
  if (found !== Infinity) return found;
  // In a gap (clocks set forward across `wall`): the first instant showing `wall` or later, the
  // instant of the change, between `wall` read at the later offset (shown earlier than `wall`)
  // and at the earlier one (shown later). Changes happen at whole seconds.
  let lo = wall - after, hi = wall - before;
  while (hi - lo > 1000) {
    const mid = lo + Math.max(1000, Math.floor((hi - lo) / 2000) * 1000);
    if (wallOf(f, mid) >= wall) hi = mid;
    else lo = mid;
  }
  return hi;
}
