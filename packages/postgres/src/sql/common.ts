import { WIDTH } from "./algorithms.ts";

/*
 * What every function of the store shares: its variables, the clock, locking and reading the
 * key's row, writing it back, and the loop over a set's policies. `@S` is the schema, `@T` the
 * table (both checked identifiers); migration.ts replaces them.
 */

/** The variables every function's fragments use (see algorithms.ts); `srv`: read the database's clock. */
export const DECLARE = `DECLARE
  st float8[]; lg float8[]; e float8[]; r float8[]; marks float8[]; rc float8[]; rc_xp float8;
  found_row boolean; stored_kinds text; bl float8 := 0; xp float8 := 0; ex float8; mk float8; m float8;
  n int; p int; o int; lo int; i int; cn int; cn0 int; d int; q int; nrows int;
  kd text; lim float8; par float8; c float8; cc float8; ch boolean; srv boolean := nw IS NULL;
  tat float8; nx float8; sz float8; ix float8; cu float8; pv float8; we float8; ws float8; el float8; bu float8; e0 float8;
  es float8; ac float8; allowed boolean; expiry float8; bm float8; tidied boolean := false;
`;

/** Reads now (µs) from the database's clock, after the row lock, unless the caller passed it. */
export const NOW = `IF srv THEN nw := floor(extract(epoch FROM clock_timestamp()) * 1000000)::float8; END IF;
`;

/**
 * A blank state's numbers for the set's kinds (zeros): one per kind, two more per sliding window,
 * one more per fixed window. An expression, not a query: computed only when a row is missing.
 */
export const BLANK_STATE = `array_fill(0::float8, ARRAY[length(kinds) + 2 * (length(kinds) - length(replace(kinds, 's', '')))
  + (length(kinds) - length(replace(kinds, 'f', '')))])`;

/** Whether the set is one counter policy: its row keeps the numbers in the plain columns num1..num3, nums NULL. */
export const PLAIN = `kinds IN ('t', 'f', 's')`;

/**
 * The row's numbers as an array, whichever layout it has: nums, or (nums NULL) the plain columns
 * of one counter policy's row (token bucket [num1], fixed window [num1, num2], sliding window
 * [num1, num2, num3]).
 */
export const NUMS = `coalesce(s.nums, CASE s.set_kinds WHEN 't' THEN ARRAY[s.num1] WHEN 'f' THEN ARRAY[s.num1, s.num2]
  ELSE ARRAY[s.num1, s.num2, s.num3] END)`;

/**
 * Locks and reads the key's row into st, lg, bl, xp; `found_row` says whether it exists. State
 * written under other kinds (a limiter reconfigured under the same prefix) reads as none, as in
 * every store. Without a row, st is the blank state.
 */
export const READ = `SELECT s.set_kinds, ${NUMS}, coalesce(s.logs, '{}'), coalesce(s.blocked_until_us, 0), s.expires_at_us
  INTO stored_kinds, st, lg, bl, xp FROM @S.@T s WHERE s.key = k FOR UPDATE;
found_row := FOUND;
IF NOT found_row OR stored_kinds IS DISTINCT FROM kinds THEN st := ${BLANK_STATE}; lg := '{}'; xp := 0; bl := 0; END IF;
`;

/** Writes st, lg, bl with expiry xp into the key's row (locked): the plain columns for one counter policy, else nums and logs. */
export const UPDATE_ROW = `UPDATE @S.@T s SET set_kinds = kinds, nums = CASE WHEN ${PLAIN} THEN NULL ELSE st END, logs = nullif(lg, '{}'),
  num1 = CASE WHEN ${PLAIN} THEN st[1] END, num2 = CASE WHEN ${PLAIN} THEN st[2] END, num3 = CASE WHEN ${PLAIN} THEN st[3] END,
  blocked_until_us = nullif(bl, 0), expires_at_us = xp WHERE s.key = k;
`;

/**
 * Writes st, lg, bl with expiry xp: an UPDATE of the locked row, or an INSERT that, when another
 * transaction inserted the key since the read, does nothing: `nrows` is 0 then, and the caller
 * decides again on the row now there.
 */
export const WRITE = `IF found_row THEN
  ${UPDATE_ROW}  nrows := 1;
ELSE
  INSERT INTO @S.@T AS s (key, set_kinds, nums, logs, blocked_until_us, expires_at_us, num1, num2, num3)
    VALUES (k, kinds, CASE WHEN ${PLAIN} THEN NULL ELSE st END, nullif(lg, '{}'), nullif(bl, 0), xp,
      CASE WHEN ${PLAIN} THEN st[1] END, CASE WHEN ${PLAIN} THEN st[2] END, CASE WHEN ${PLAIN} THEN st[3] END)
    ON CONFLICT (key) DO NOTHING;
  GET DIAGNOSTICS nrows = ROW_COUNT;
END IF;
`;

/** Sets kd, lim, par and i for policy p. */
export const POLICY = `kd := substr(kinds, p, 1); lim := lims[p]; par := pars[p]; i := 2 + (p - 1) * 4;
`;

/** Runs `body` for every policy, with o (and, in the bodies, lo) advanced past each one. */
export const EACH = (body: string): string =>
  `o := 1; lo := 0;
FOR p IN 1..n LOOP
${POLICY}${body}o := o + CASE kd WHEN 't' THEN ${WIDTH.t} WHEN 'f' THEN ${WIDTH.f} WHEN 's' THEN ${WIDTH.s} ELSE 1 END;
END LOOP;
`;

/**
 * A key too long for a btree entry (an identifier of 1,024 characters is up to 6 KB of UTF-8)
 * becomes `<prefix>}<sha256 of the key>`: no other key has a `}` right after the prefix (the
 * prefix has no braces; an identifier's key starts with `{`), so none can spell it.
 */
export const LONG_KEY = `IF octet_length(k) > 1024 THEN
  k := substr(k, 1, strpos(k, '{') - 1) || '}' || encode(sha256(convert_to(k, 'UTF8')), 'hex');
END IF;
`;

/** A blocked key: every policy denied with 0 remaining, its reset and wait at least until the block ends. */
export const OVERRIDE_BLOCKED = `r := r[1 : 1 + 4 * n];
r[1] := 0;
FOR p IN 1..n LOOP
  i := 2 + (p - 1) * 4;
  r[i] := 0; r[i + 1] := 0;
  IF r[i + 2] < ceil(bl / 1000) THEN r[i + 2] := ceil(bl / 1000); END IF;
  IF r[i + 3] <> -1 AND r[i + 3] < ceil((bl - nw) / 1000) THEN r[i + 3] := ceil((bl - nw) / 1000); END IF;
END LOOP;
`;
