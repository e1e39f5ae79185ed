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
 * The kinds whose row can carry the mark of a key without a block (an empty `entries`, which
 * their state does not use): see upsert.ts.
 */
export const UNBLOCKED_KINDS = "'t', 'f', 's'";

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
 * reading the row's old columns (`kind`, `n1`, `n2`, `n3`) and the procedure's `nw`, `L`, `pr`,
 * `cost`. `pre` lists the assignments, in order, of the user variables `@fg_a`, `@fg_b`, `@fg_c`
 * (the state as the apply fragment reads it: another kind's row reads as no state), `@fg_ok`
 * (whether the cost fits), `@fg_n1`..`@fg_n3` and `@fg_nx` (the state and expiry it writes when
 * it fits). `insert` is a new row's n1, n2, n3 and expiry, where a cost within the limit always
 * fits. `admitted` answers an admission from those variables: remaining, reset (ms) and the mark,
 * as the apply fragment would.
 */
export interface UpsertKind {
  readonly pre: readonly string[];
  readonly insert: readonly [n1: string, n2: string, n3: string, expires: string];
  readonly admitted: readonly [remaining: string, resetMs: string, mark: string];
}

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
