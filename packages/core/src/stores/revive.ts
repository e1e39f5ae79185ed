import { ALGORITHM, type Algorithm } from "../algorithms/algorithm.ts";
import { CALENDAR_WINDOW, calendarWindow } from "../algorithms/calendar-window.ts";
import { CONCURRENCY } from "../algorithms/concurrency.ts";
import { FIXED_WINDOW } from "../algorithms/fixed-window.ts";
import type { PolicyKind } from "../algorithms/registry.ts";
import { SLIDING_LOG } from "../algorithms/sliding-log.ts";
import { SLIDING_WINDOW } from "../algorithms/sliding-window.ts";
import { TOKEN_BUCKET } from "../algorithms/token-bucket.ts";
import { describeValue, FloodgateError } from "../errors.ts";
import type { Policy } from "../policies.ts";

/*
 * A policy carries its algorithm under a symbol, which does not travel: JSON, structured clone
 * and RPC (a Durable Object's, a worker thread's) hand the other side the plain fields only.
 * A store that evaluates on the far side of such a boundary revives each policy there. Keyed by
 * PolicyKind, so a kind added to the registry without its algorithm here fails to compile.
 */
const IMPLEMENTATIONS: { readonly [K in PolicyKind]: Algorithm } = {
  "token-bucket": TOKEN_BUCKET,
  "fixed-window": FIXED_WINDOW,
  "sliding-window": SLIDING_WINDOW,
  "sliding-log": SLIDING_LOG,
  concurrency: CONCURRENCY,
  "calendar-window": CALENDAR_WINDOW,
};

const NUMBER_FIELDS = ["limit", "windowMs", "refillRate", "intervalMs", "blockMs"] as const;

/**
 * The policy whose plain fields `data` holds (a {@link Policy} after JSON or structured clone),
 * whole again: usable by `evaluateState`. Throws `INVALID_ARGUMENT` when `data` is not such a
 * policy (unknown kind, a field missing or not a finite number >= 0, a limit below 1).
 *
 * @example
 * const policies = request.policies.map(revivePolicy); // inside a Durable Object, from an RPC argument
 */
export function revivePolicy(data: unknown): Policy {
  const d = (typeof data === "object" && data !== null ? data : {}) as Record<string, unknown>;
  const algorithm = typeof d.kind === "string" && Object.hasOwn(IMPLEMENTATIONS, d.kind)
    ? IMPLEMENTATIONS[d.kind as PolicyKind]
    : undefined;
  const badNumber = (f: (typeof NUMBER_FIELDS)[number]): boolean => {
    const v = d[f];
    return typeof v !== "number" || !Number.isFinite(v) || v < 0 || (f === "limit" && (!Number.isInteger(v) || v < 1));
  };
  const bad = algorithm === undefined ? "kind" : typeof d.name !== "string" ? "name" : NUMBER_FIELDS.find(badNumber);
  if (bad !== undefined) {
    throw new FloodgateError(
      "INVALID_ARGUMENT",
      `revivePolicy(): not a policy's fields (${bad} is ${
        describeValue(d[bad])
      }); expected an object from a policy factory, after JSON or structured clone: a known kind, a name, and limit (a whole number >= 1), windowMs, refillRate, intervalMs and blockMs (finite numbers >= 0).`,
    );
  }
  if (d.kind === "calendar-window") return reviveCalendar(d);
  return Object.freeze({
    kind: d.kind as PolicyKind,
    name: d.name as string,
    limit: d.limit as number,
    windowMs: d.windowMs as number,
    refillRate: d.refillRate as number,
    intervalMs: d.intervalMs as number,
    blockMs: d.blockMs as number,
    [ALGORITHM]: algorithm!,
  });
}

/** A calendar window's fields, whole again: built by its factory, which checks its calendar. */
function reviveCalendar(d: Record<string, unknown>): Policy {
  const c = (typeof d.calendar === "object" && d.calendar !== null ? d.calendar : {}) as Record<string, unknown>;
  const p = calendarWindow({
    limit: d.limit as number,
    period: c.period as "day",
    timeZone: c.timeZone as string,
    ...(c.period === "month" ? { billingDay: c.billingDay as number } : {}),
    ...(c.period === "week" ? { weekStart: c.weekStart as number } : {}),
    name: d.name as string,
    ...(d.blockMs as number > 0 ? { block: d.blockMs as number } : {}),
  });
  if (p.windowMs !== d.windowMs) {
    throw new FloodgateError(
      "INVALID_ARGUMENT",
      `revivePolicy(): calendar window "${p.name}" has windowMs ${String(d.windowMs)}; expected ${p.windowMs}.`,
    );
  }
  return p;
}
