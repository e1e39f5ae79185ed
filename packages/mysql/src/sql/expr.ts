/*
 * SQL expressions the procedures share. Every quantity is a BIGINT and every time an integer
 * number of µs, as in the TypeScript algorithms; divisions are integer divisions (`DIV`), never
 * `/`, which yields a DECIMAL rounded to four places and would round 2.99999 up to 3.
 */

/** `ceil(n / 1000)` for `n >= 0`: a µs time in whole ms, rounded up. */
export const ceilMs = (n: string): string => `((${n}) + 999) DIV 1000`;

/** `ceil(n / d)` for any sign of `n` (`d > 0`). */
export const cdiv = (n: string, d: string): string => `IF((${n}) >= 0, ((${n}) + ${d} - 1) DIV ${d}, -((-(${n})) DIV ${d}))`;

/**
 * A sliding log is a string of 8-byte big-endian µs timestamps, oldest first: entry `k` (0 = the
 * oldest) of log `lg`.
 */
export const entry = (lg: string, k: string): string => `CAST(CONV(HEX(SUBSTRING(${lg}, 8 * (${k}) + 1, 8)), 16, 10) AS SIGNED)`;

/** The 8 bytes of a log entry at µs time `x` (`x >= 0`). */
export const enc = (x: string): string => `UNHEX(LPAD(HEX(${x}), 16, '0'))`;

/** Entries in log `lg`. */
export const entries = (lg: string): string => `(COALESCE(LENGTH(${lg}), 0) DIV 8)`;

/** The `i`-th (1-based) integer of a comma-separated list. */
export const nth = (list: string, i: string): string => `CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(${list}, ',', ${i}), ',', -1) AS SIGNED)`;

/** The server's clock in epoch µs, free of the session's time zone (no DST fold). */
export const SERVER_NOW = "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))";

/**
 * A policy's row marked as a key without a block since it was charged (see upsert.ts): a
 * counter's by an empty `entries` (a column its state does not use), a sliding log's by `n1 = 1`
 * (a number its state does not use: the general procedures write it back as they read it).
 */
export const MARKED = "((kind IN ('t', 'f', 's') AND entries = '') OR (kind = 'l' AND n1 = 1))";

/** The assignments that take the mark off a row `MARKED` selects. */
export const UNMARK = "entries = IF(kind = 'l', entries, NULL), n1 = IF(kind = 'l', 0, n1)";

/** Most policies in one set: their kinds travel as one character each in a VARCHAR(32). */
export const MAX_POLICIES = 32;

/**
 * The fragments of one kind, run inside the kernel procedures (kernel.ts) with these names in
 * scope: `kd` kind letter, `L` limit, `pr` parameter (a token bucket's µs per token, a window's
 * ms), `nw` now (µs), `a`, `b`, `c` (the state's numbers) and `lg` (its log), `nx` (set: the
 * state's expiry, µs). `apply` also reads `cost` and `chg` and sets `ok`, `rem`, `rst`, `rty`
 * (the four figures); `refund` reads `cost` and `mk` (the mark, NULL for none); `settle` reads
 * `est`, `act` and `mk`. Each is a block of statements with its own DECLAREs.
 */
export interface SqlKind {
  readonly code: string;
  readonly apply: string;
  readonly refund: string;
  readonly settle: string;
  /** The kind's charge as one statement, when its decision fits in expressions (see upsert.ts). */
  readonly upsert?: UpsertKind;
}

/**
 * One policy's decision as the expressions of an UPDATE (or an `INSERT ... ON DUPLICATE KEY UPDATE`),
 * reading the row's old columns and the procedure's `nw`, `L`, `pr`, `cost`. `pre` lists the
 * assignments, in order, of user variables (`@fg_...`) from the old row: among them `@fg_ok`,
 * whether the cost fits (another kind's row reads as no state). `columns` assigns `n1`, `n2`,
 * `n3`, `entries` and `expires_us` from them: the state after the charge and the row's mark when
 * `@fg_ok`, else every column as it was; `marked` is the condition on a row that carries the mark.
 * `fast`, when given, replaces both in the UPDATE of a marked row of the kind (what they need not
 * check or write there). `insert` is a new row's n1, n2, n3, entries and expiry, where a cost
 * within the limit always fits: its expressions set the variables `admitted` reads and `@fg_ok` to
 * 1, in order. `admitted` answers an admission from the variables: remaining, reset (ms) and the
 * mark, as the apply fragment would; `restore` sets the apply fragment's `a`, `b`, `c`, `lg` to
 * the state the statement read, for a denial's figures.
 *
 * Before the statements the procedure sets `@fg_ok` to NULL, with `init` (more assignments);
 * `matched` is a variable the UPDATE of a marked row sets, so still NULL when there was none.
 * With `undecided`, the statements may read a row and leave `@fg_ok` NULL, writing nothing: the
 * procedure then decides in a transaction.
 */
export interface UpsertKind {
  readonly init: string;
  readonly matched: string;
  readonly undecided?: true;
  readonly fast?: { readonly pre: readonly string[]; readonly columns: string };
  readonly pre: readonly string[];
  readonly columns: string;
  readonly marked: string;
  readonly insert: readonly [n1: string, n2: string, n3: string, entries: string, expires: string];
  readonly admitted: readonly [remaining: string, resetMs: string, mark: string];
  readonly restore: string;
}

/**
 * The `UpsertKind` of a counter kind (token bucket, fixed and sliding window): `pre` sets
 * `@fg_a`, `@fg_b`, `@fg_c` (the state read), `@fg_ok`, and `@fg_n1`..`@fg_n3`, `@fg_nx` (the
 * state and expiry written when it fits); `insert` gives a new row's numbers and expiry. The mark
 * is an empty `entries`.
 */
export const counterUpsert = (
  u: Pick<UpsertKind, "pre" | "admitted"> & { readonly insert: readonly [n1: string, n2: string, n3: string, expires: string] },
): UpsertKind => ({
  init: "",
  matched: "@fg_ok",
  pre: u.pre,
  columns: `n1 = IF(@fg_ok, @fg_n1, n1), n2 = IF(@fg_ok, @fg_n2, n2), n3 = IF(@fg_ok, @fg_n3, n3),
    entries = IF(@fg_ok, '', entries), expires_us = IF(@fg_ok, @fg_nx, expires_us)`,
  marked: "entries = ''",
  insert: [
    `@fg_n1 := ${u.insert[0]}`,
    `@fg_n2 := ${u.insert[1]}`,
    `@fg_n3 := ${u.insert[2]}`,
    "IF(@fg_ok := 1, '', '')",
    `@fg_nx := ${u.insert[3]}`,
  ],
  admitted: u.admitted,
  restore: "SET a = @fg_a, b = @fg_b, c = @fg_c;\n",
});

/**
 * The settlement of the window and bucket kinds: `est − act` given back into the mark (the
 * refund fragment) or `act − est` charged into it (the overcharge fragment), as the TypeScript's
 * `settleByDifference`. Both read `cost`.
 */
export const settleByDifference = (refund: string, overcharge: string): string =>
  `SET cost = ABS(est - act);
IF act > est THEN
${overcharge}ELSE
${refund}END IF;
`;
