import type { SqlKind } from "./expr.ts";
import { logApply, logRefund, removeEntries } from "./sliding-log.ts";

/**
 * In flight, as algorithms/concurrency.ts: a sliding log whose window is the timeout, one entry
 * per reservation whatever its estimate; settling removes that entry (the mark is its timestamp).
 */
export const CONCURRENCY_SQL: SqlKind = {
  code: "c",
  apply: logApply("1"),
  // Into a mark: the request's one unit; without one (a manual correction), the newest `cost`.
  refund: logRefund("IF(mk IS NULL, cost, 1)"),
  // Whatever the request cost, it is no longer in flight.
  settle: removeEntries("1"),
};
