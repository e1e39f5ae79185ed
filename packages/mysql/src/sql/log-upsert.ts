import { ceilMs, enc, entry, type UpsertKind } from "./expr.ts";

/*
 * The sliding log's charge as the expressions of one UPDATE (see upsert.ts), deciding exactly as
 * its apply fragment (sliding-log.ts) does, without a loop:
 *
 * - the log is sorted, so whether `cost` more fits is read from one entry: after dropping the
 *   entries at or before `at_ - window` (`at_` the later of now and the newest entry), at most
 *   `L - cost` may be left, that is, there are no more than `L - cost` entries at all, or entry
 *   `n + cost - L - 1` (0 = the oldest) has left the window;
 * - on an admission, the entries that have left the window are dropped: every one before
 *   `lo = n + cost - L` has (or there is none, lo = 0); the statement finds where the window
 *   starts when it is at `lo` (the usual answer when a log is charged steadily: nothing more has
 *   left since the last charge), at the end (every entry has left: a key back after a quiet
 *   window), or by `BISECTIONS` halvings of the `2^BISECTIONS - 1` entries after `lo`. When more
 *   of them have left (and not all), it writes nothing and leaves `@fg_ok` NULL: the procedure
 *   then decides in a transaction, with a loop (consume-one.ts). The halvings are nested so that
 *   the statement stops where the search ends, but the server prepares every one at each
 *   execution (30, enough for any log, cost more than the transaction): a few of them;
 * - a denial writes nothing (its entries are copied into `@fg_lg` for the apply fragment, which
 *   gives its figures); an admission writes the entries still in the window and `cost` entries of
 *   `at_`.
 *
 * A user variable the statement reads before the session ever set it reads as a string, whose
 * comparison with another would compare text (`'10' < '9'`): two variables are compared by their
 * difference, a number, and `@fg_at` is cast before it is written out.
 *
 * The mark of a row without a block is `n1 = 1` (the log's state does not use its numbers, which
 * every other procedure writes back as it read them).
 */

/** Halvings of the entries after the first that must go: the window's start is searched among the next 2^k - 1. */
const BISECTIONS = 4;

/** The window, µs. */
const SIZE = "pr * 1000";
/** The newest time that has left the window. */
const TH = `@fg_at - ${SIZE}`;
/** Entry `k` of the old row's log (µs). */
const at = (k: string): string => entry("entries", k);

/** The bisection of [@fg_lo, @fg_hi], where the first entry after TH lies: it ends in `@fg_lo` (= `@fg_hi`). */
const bisect = (steps: number): string =>
  steps === 0 ? "0" : `IF(@fg_hi - @fg_lo > 0, CONCAT_WS(',', @fg_m := (@fg_lo + @fg_hi) DIV 2,
      IF(${at("@fg_m")} <= ${TH}, @fg_lo := @fg_m + 1, @fg_hi := @fg_m), ${bisect(steps - 1)}), 0)`;

/** The decision and the window's start, from entries `n` (another kind's row: none). */
const decide = (n: string): string[] => [
  `@fg_n := ${n}`,
  `@fg_at := IF(@fg_n > 0, GREATEST(nw, ${at("@fg_n - 1")}), nw)`,
  "@fg_lo := GREATEST(0, @fg_n + cost - L)",
  `@fg_ok := cost <= L AND (@fg_lo = 0 OR ${at("@fg_lo - 1")} <= ${TH})`,
  // [lo, hi]: lo when it is in the window, the end when none is, else the next 2^k - 1 entries;
  // beyond them, no decision.
  `@fg_hi := IF(@fg_ok AND @fg_n - @fg_lo > 0 AND ${at("@fg_lo")} <= ${TH},
      IF(${at("@fg_n - 1")} <= ${TH}, @fg_lo := @fg_n, LEAST(@fg_n - 1, @fg_lo + ${2 ** BISECTIONS - 1})), @fg_lo)`,
  `@fg_ok := IF(@fg_hi - @fg_lo > 0 AND ${at("@fg_hi")} <= ${TH}, NULL, @fg_ok)`,
  bisect(BISECTIONS),
  "@fg_ok := IF(@fg_hi - @fg_lo > 0, NULL, @fg_ok)",
  "@fg_lg := IF(@fg_ok, NULL, entries)",
];

/** The entries an admission writes: those from the window's start, then `cost` of `at_`. */
const ENTRIES = `entries = IF(@fg_ok, CONCAT(IF(@fg_n > 0, SUBSTRING(entries, 8 * @fg_lo + 1), ''), REPEAT(${
  enc("CAST(@fg_at AS SIGNED)")
}, cost)), entries)`;
const EXPIRES = `expires_us = IF(@fg_ok, @fg_at + ${SIZE}, expires_us)`;

export const LOG_UPSERT: UpsertKind = {
  init: ", @fg_n = NULL",
  matched: "@fg_n",
  undecided: true,
  // The marked row: of this kind, its numbers as the mark left them.
  fast: { pre: decide("COALESCE(LENGTH(entries), 0) DIV 8"), columns: `${ENTRIES},\n    ${EXPIRES}` },
  pre: decide("IF(kind = 'l', COALESCE(LENGTH(entries), 0) DIV 8, 0)"),
  columns: `n1 = IF(@fg_ok, 1, n1), n2 = IF(@fg_ok, 0, n2), n3 = IF(@fg_ok, 0, n3),
    ${ENTRIES},
    ${EXPIRES}`,
  marked: "n1 = 1",
  insert: [
    "IF(LENGTH(CONCAT_WS(',', @fg_n := 0, @fg_lo := 0, @fg_at := nw, @fg_ok := 1)) > 0, 1, 0)",
    "0",
    "0",
    `REPEAT(${enc("nw")}, cost)`,
    `nw + ${SIZE}`,
  ],
  admitted: ["L - (@fg_n - @fg_lo) - cost", ceilMs(`@fg_at + ${SIZE}`), "@fg_at"],
  restore: "SET lg = @fg_lg;\n",
};
