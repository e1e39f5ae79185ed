import { type Duration, durationMs } from "../duration.ts";
import { FloodgateError } from "../errors.ts";
import type { CalendarSpec, Policy } from "../policy.ts";
import { type OptionSpecs, parseOptions, range } from "../validation.ts";
import {
  ALGORITHM,
  type Algorithm,
  type AlgorithmDefinition,
  algorithmOf,
  type AlgorithmTraits,
  ceilMs,
  type LuaAlgorithm,
  NEVER,
  settleByDifference,
  settleFragment,
} from "./algorithm.ts";
import { periodAt } from "./calendar/periods.ts";
import { isTimeZone } from "./calendar/zone.ts";
import { BLOCK, LIMIT, NAME } from "./window-options.ts";

/*
 * A calendar window: a fixed window whose windows are local days, weeks or months (billing
 * cycles) in an IANA time zone. State: [start of the period counted, epoch ms; count]. A period
 * is found from the deciding clock (the store's, where it owns one), so two periods of different
 * lengths never share a count, and a new period starts from zero.
 */

/** Never leased (a quota is decided exactly), nothing held, denials cacheable until the period ends. */
const CALENDAR_TRAITS: AlgorithmTraits = { lease: undefined, holdsUnits: false, cachesDenials: true };

/** The most a count reaches through a settlement's overcharge: twice the limit, as a fixed window's. */
const saturated = (limit: number): number => Math.min(2 * limit, Number.MAX_SAFE_INTEGER);

/** The period containing `nowUs` (epoch µs) of a calendar policy. */
const spanAt = (p: Policy, nowUs: number) => periodAt(p.calendar!, Math.floor(nowUs / 1000));

const refundCalendar: Algorithm["refund"] = (p, s, o, _log, now, cost, mark) => {
  const span = spanAt(p, now);
  if (s[o] === Math.max(span.start, s[o]!) && (mark === undefined || s[o] === mark)) s[o + 1] = Math.max(0, s[o + 1]! - cost);
  return span.end * 1000;
};

/** The calendar window's algorithm, which also packs the boundaries the Redis scripts take. */
interface CalendarAlgorithm extends Algorithm {
  /** See {@link calendarParameter}: on the algorithm, so that only bundles building calendar windows carry the calendar code. */
  luaParameter(p: Policy, nowMs: number): number;
}

/**
 * Calendar window: [period start ms, count]. A period earlier than the stored one (a clock set
 * back) counts as the stored one, as a fixed window's earlier window does.
 */
export const CALENDAR_WINDOW: CalendarAlgorithm = {
  luaParameter: (p, nowMs) => calendarParameter(p, nowMs),
  traits: CALENDAR_TRAITS,
  width: 2,
  keepsLog: false,
  apply(p, s, o, _log, now, cost, out, i, charge) {
    const span = spanAt(p, now);
    const limit = p.limit;
    const start = Math.max(span.start, s[o]!);
    const count = s[o] === start ? s[o + 1]! : 0;
    const end = span.end * 1000;
    out[i + 2] = span.end;
    if (count + cost <= limit) {
      out[i] = 1;
      out[i + 3] = 0;
      if (charge) {
        s[o] = start;
        s[o + 1] = count + cost;
        out[i + 1] = limit - count - cost;
        return end;
      }
    } else {
      out[i] = 0;
      out[i + 3] = cost > limit ? NEVER : ceilMs(end - now);
    }
    out[i + 1] = Math.max(0, limit - count);
    return end;
  },
  refund: refundCalendar,
  settle: /* @__PURE__ */ settleByDifference(refundCalendar, (p, s, o, _log, now, cost, mark) => {
    const span = spanAt(p, now);
    if (s[o] === Math.max(span.start, s[o]!) && s[o] === mark) s[o + 1] = Math.min(s[o + 1]! + cost, saturated(p.limit));
    return span.end * 1000;
  }),
  accepts: (s, o) => Number.isSafeInteger(s[o]) && s[o]! >= 0 && Number.isSafeInteger(s[o + 1]) && s[o + 1]! >= 0,
  // The period that ends at `resetAt`: a 23-hour day, February, the billing cycle as it falls.
  windowMsAt(p, resetAt) {
    const span = periodAt(p.calendar!, resetAt - 1);
    return span.end - span.start;
  },
};

/** Options of {@link calendarWindow}. */
export interface CalendarWindowOptions {
  /** Requests (cost units) admitted per period. */
  limit: number;
  /** `"day"`, `"week"` or `"month"`: local calendar days, weeks or months. */
  period: "day" | "week" | "month";
  /** The IANA time zone the periods are local to, e.g. `"Europe/Berlin"`, `"America/New_York"`, `"UTC"`. */
  timeZone: string;
  /**
   * Months only: the day of the month a cycle starts, 1 to 31 (default 1). A cycle anchored on a
   * day a month lacks starts on that month's last day: on the 31st, cycles start Jan 31, Feb 28
   * (29 in a leap year), Mar 31, Apr 30...
   */
  billingDay?: number;
  /** Weeks only: the day a week starts, 0 (Sunday) to 6 (Saturday); default 1 (Monday). */
  weekStart?: number;
  /** Policy name; default `"<limit>-per-<period>"`, e.g. `"10000-per-month"`. */
  name?: string;
  /** As every policy's `block`: once denied, the key stays denied this long. */
  block?: Duration;
}

const PERIODS = ["day", "week", "month"];

const OPTIONS: OptionSpecs = {
  limit: LIMIT,
  period: [(v) => PERIODS.includes(v as string), `"day", "week" or "month"`, 1],
  timeZone: [isTimeZone, "an IANA time zone such as Europe/Berlin (one this runtime's Intl knows)", 1],
  billingDay: range("a day of the month", 1, 31),
  weekStart: range("a day of the week (0 = Sunday)", 0, 6),
  name: NAME,
  block: BLOCK,
};

/** The longest period of each length, ms (a DST change, or a zone's change of offset, included). */
const LONGEST: Record<CalendarSpec["period"], number> = {
  day: 2 * 86_400_000,
  week: 8 * 86_400_000,
  month: 32 * 86_400_000,
};

/**
 * A calendar window: `limit` per local day, week or month in an IANA time zone, counted from
 * local midnight (23 or 25 hours on a DST change) and, for months, from a billing day. `resetAt`
 * and `retryAfterMs` give the true local end of the period. Time zones come from the runtime's
 * `Intl` (every modern runtime carries the IANA database).
 *
 * @example
 * const monthly = calendarWindow({ limit: 10_000, period: "month", timeZone: "Europe/Berlin", billingDay: 31 });
 */
export function calendarWindow(options: CalendarWindowOptions): Policy {
  const where = "calendarWindow()";
  const o = parseOptions<CalendarWindowOptions>(options, where, OPTIONS);
  if (o.billingDay !== undefined && o.period !== "month") {
    throw new FloodgateError(
      "INVALID_OPTION",
      `${where}: \`billingDay\` applies to a period of "month" only; received period "${o.period}".`,
    );
  }
  if (o.weekStart !== undefined && o.period !== "week") {
    throw new FloodgateError(
      "INVALID_OPTION",
      `${where}: \`weekStart\` applies to a period of "week" only; received period "${o.period}".`,
    );
  }
  const calendar: CalendarSpec = Object.freeze({
    period: o.period,
    timeZone: o.timeZone,
    billingDay: o.billingDay ?? 1,
    weekStart: o.weekStart ?? 1,
  });
  return Object.freeze({
    kind: "calendar-window",
    name: o.name ?? `${o.limit}-per-${o.period}`,
    limit: o.limit,
    windowMs: LONGEST[o.period],
    refillRate: 0,
    intervalMs: 0,
    blockMs: o.block === undefined ? 0 : durationMs(o.block)!,
    calendar,
    [ALGORITHM]: CALENDAR_WINDOW,
  });
}

/*
 * Redis. The script cannot read time zones, so the client sends, per call, the boundaries around
 * its own clock, packed into the parameter: the boundary B nearest its clock and the lengths of
 * the periods either side, each in whole minutes. The script takes the period containing its own
 * clock (the server's): [B - before, B) or [B, B + after); a clock outside both (more than half
 * a period off the client's) is refused with an error, never approximated.
 *
 * Packing, exact in a double: P = B * 2^26 + code(before) * 2^13 + code(after), B in minutes
 * since the epoch (below 2^27: until the year 2225), code(length) = days * 256 + (minutes beyond
 * whole days + 128), days 0 to 31 and minutes -128 to 127.
 */

const MINUTE = 60_000;

function lengthCode(ms: number): number {
  const minutes = ms / MINUTE;
  const days = Math.round(minutes / 1440);
  const extra = minutes - days * 1440;
  if (!Number.isInteger(minutes) || days > 31 || extra < -128 || extra > 127) return -1;
  return days * 256 + extra + 128;
}

/** The Lua parameter of a calendar policy at `nowMs` on the client's clock. */
export function calendarParameter(p: Policy, nowMs: number): number {
  const spec = p.calendar!;
  const here = periodAt(spec, nowMs);
  const early = nowMs - here.start < here.end - nowMs;
  const other = early ? periodAt(spec, here.start - 1) : periodAt(spec, here.end);
  const b = early ? here.start : here.end;
  const before = early ? here.start - other.start : here.end - here.start;
  const after = early ? here.end - here.start : other.end - other.start;
  const bc = lengthCode(before), ac = lengthCode(after);
  if (b % MINUTE !== 0 || b / MINUTE >= 134_217_728 || b < 0 || bc < 0 || ac < 0) {
    throw new FloodgateError(
      "INVALID_ARGUMENT",
      `calendar window "${p.name}": the period boundary ${
        new Date(b).toISOString()
      } in ${spec.timeZone} is not one the Redis stores represent (whole minutes from 1970 to 2225, periods of at most 31 days and 2 hours); the memory store and stores evaluating in TypeScript count it.`,
    );
  }
  return (b / MINUTE) * 67_108_864 + bc * 8192 + ac;
}

/**
 * Reads the period containing \`now\` from P (ps, pe: µs; refuses a clock outside both periods)
 * and the state: st (period counted, ms), count, c (whether the stored state is that period's).
 * Redis value: the string "c<period start ms>:<count>" (no other kind's value reads as it).
 */
const CW_READ = `local bq = floor(P / 67108864)
local r = P - bq * 67108864
local bc = floor(r / 8192)
local ac = r - bc * 8192
bq = bq * 60000000
local ps, pe
if now >= bq then ps, pe = bq, bq + (floor(ac / 256) * 1440 + ac % 256 - 128) * 60000000
else ps, pe = bq - (floor(bc / 256) * 1440 + bc % 256 - 128) * 60000000, bq end
if now < ps or now >= pe then return redis.error_reply("floodgate: calendar window: the server's clock (" .. fmt("%d", floor(now / 1000)) .. " ms) is outside the periods the client sent (" .. fmt("%d", floor(ps / 1000)) .. " to " .. fmt("%d", floor(pe / 1000)) .. " ms): the clocks differ by more than half a period") end
local v, sc, count = redis.pcall("GET", k), -1, 0
if type(v) == "string" then
  local x, y = string.match(v, "^c(%d+):(%d+)$")
  if x then sc, count = x + 0, y + 0 end
end
local st = ps / 1000
if sc > st then st = sc end
c = sc == st
if not c then count = 0 end
`;

const CALENDAR_WINDOW_LUA: LuaAlgorithm = /* @__PURE__ */ (() => ({
  code: "k",
  parameter: () => 0,
  parameterAt: (p: Policy, nowMs: number) => (algorithmOf(p) as CalendarAlgorithm).luaParameter(p, nowMs),
  fragments: {
    eval: `${CW_READ}ok = count + cost <= L
out[i], out[i + 1], out[i + 2] = ok and 1 or 0, max(0, L - count), pe / 1000
if ok then out[i + 3] = 0 elseif cost > L then out[i + 3] = -1 else out[i + 3] = ceil((pe - now) / 1000) end
a, b, d = st, count, pe
`,
    commit: `b = b + cost
redis.call("SET", k, fmt("c%d:%d", a, b), "PX", fmt("%d", max(1, ceil((d - now) / 1000))))
out[i + 1], out[j] = L - b, a
`,
    settle: settleFragment(
      `${CW_READ}if c and st == m then redis.call("SET", k, fmt("c%d:%d", st, max(0, count - cost)), "KEEPTTL") end
`,
      `${CW_READ}if c and st == m then redis.call("SET", k, fmt("c%d:%d", st, math.min(count + cost, 2 * L, 9007199254740991)), "KEEPTTL") end
`,
    ),
    refund: `${CW_READ}if c and (m == nil or st == m) then redis.call("SET", k, fmt("c%d:%d", st, max(0, count - cost)), "KEEPTTL") end
`,
  },
}))();

export const CALENDAR_WINDOW_DEFINITION: AlgorithmDefinition<"calendar-window"> = {
  traits: CALENDAR_TRAITS,
  kind: "calendar-window",
  factoryName: "calendarWindow",
  lua: CALENDAR_WINDOW_LUA,
  docs: {
    call: "calendarWindow({ limit, period, timeZone })",
    statePerKey: "two numbers",
    guarantee: "at most `limit` per local day, week or month (billing cycle) in a time zone",
    resetAt: "local end of the current period",
  },
  exampleOptions: (limit, _windowMs, name) => ({
    limit,
    period: "day",
    timeZone: "Europe/Berlin",
    ...(name === undefined ? {} : { name }),
  }),
  retentionMs: (p) => p.windowMs,
};
