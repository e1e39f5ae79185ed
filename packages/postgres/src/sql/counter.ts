import { SLIDING_APPLY, tokenExpiry } from "./algorithms.ts";

/*
 * One counter policy's charge (token bucket, fixed window, sliding window) in one statement: an
 * upsert of the row's plain columns (num1..num3) whose ON CONFLICT ... WHERE is the policy's
 * admission, in the same doubles as the kind's `apply` in algorithms.ts, and whose RETURNING is
 * the store result. Each kind's function `<table>_charge_<kind>` runs it, and only when it
 * returns no row anything more:
 *
 * - A new key: the row is inserted as charged (a cost above the limit inserts nothing).
 * - A row of this kind in the plain layout, no block in force, admitted: updated in place. ON
 *   CONFLICT locks the row and evaluates the admission on its latest committed version, so
 *   concurrent charges on one key run one after the other at READ COMMITTED, none lost.
 * - A denial: the row read again with FOR UPDATE. The failed upsert
 *   holds its lock already, and the read, a statement of its own, has a snapshot of its own: it
 *   reads the version the upsert's admission failed on, a row inserted meanwhile included. The
 *   figures are computed there (a sliding window's by its apply, for the loops of its retry
 *   time); nothing is written.
 * - Anything else goes to the consume function, which decides as ever: a block in force or one to start (the set blocks), other kinds stored, a row of the array
 *   layout (written before schema version 3), a cost above the limit.
 *
 * Time: `nw` is the caller's (clock "local") or the database's, read once before the upsert, so
 * before it may wait for the row's lock (the consume function, called without a time of the
 * caller's, reads it after the lock; called from here, it decides on the same `nw`). Every
 * kind takes the later of the stored window or arrival time and now, so a decision that waited is
 * decided as at the moment it arrived, never admitting more than it would have then.
 *
 * Arguments: ky (the key, at most 1,024 bytes: the store sends longer keys to the consume
 * function, which hashes them), lim, par (µs per token, or the window in ms), cost (> 0), nw (µs
 * or NULL), blocks (as consume's, NULL when none).
 */

const LIM = "lim";
const PAR = "par";
const COST = "cost";
/** Now (µs): read once, before the upsert. */
const NW = "nw";

/** Per kind: the insert's plain columns and values, the update's SET, its admission and the RETURNING figures. */
export interface Charge {
  readonly columns: string;
  readonly fresh: string;
  readonly freshAdmits: string;
  /** The update's SET: each plain column the kind writes and its new value (s: the row as locked). */
  readonly set: readonly (readonly [column: string, value: string])[];
  readonly admits: string;
  /** The figures from the row as written (s): remaining, resetAt (ms), the charge's mark. */
  readonly remaining: string;
  readonly reset: string;
  readonly mark: string;
  /**
   * A denial decided in SQL on the row read again (s, locked; nw now): the admission that must
   * fail, and the figures [remaining, resetAt, retryAfterMs]. None: a denial goes to the function.
   */
  readonly denial?: { readonly admits: string; readonly figures: string };
  /** Else a denial decided in PL/pgSQL on the row read again (the kind's apply), with the variables it declares. */
  readonly denialApply?: string;
  readonly declare?: string;
}

const tokenBucket = (): Charge => {
  const tat = `greatest(s.num1, ${NW})`;
  return {
    columns: "num1, expires_at_us",
    fresh: `nw + ${COST} * ${PAR}, ${tokenExpiry(`nw + ${COST} * ${PAR}`)}`,
    freshAdmits: `${COST} <= ${LIM} AND (nw + ${COST} * ${PAR}) - nw <= ${LIM} * ${PAR}`,
    set: [["num1", `${tat} + ${COST} * ${PAR}`], ["expires_at_us", tokenExpiry(`${tat} + ${COST} * ${PAR}`)]],
    admits: `${COST} <= ${LIM} AND (${tat} + ${COST} * ${PAR}) - ${NW} <= ${LIM} * ${PAR}`,
    remaining: `floor((${LIM} * ${PAR} - (s.num1 - ${NW})) / ${PAR})`,
    reset: "ceil(s.num1 / 1000)",
    mark: "s.num1",
    denial: {
      admits: `${COST} <= ${LIM} AND (greatest(s.num1, nw) + ${COST} * ${PAR}) - nw <= ${LIM} * ${PAR}`,
      figures: `greatest(0, floor((${LIM} * ${PAR} - (greatest(s.num1, nw) - nw)) / ${PAR})), ceil(greatest(s.num1, nw) / 1000),
      CASE WHEN ${COST} > ${LIM} THEN -1 ELSE ceil(((greatest(s.num1, nw) + ${COST} * ${PAR}) - ${LIM} * ${PAR} - nw) / 1000) END`,
    },
  };
};

const fixedWindow = (): Charge => {
  const sz = `(${PAR} * 1000)`;
  const ix = "greatest(excluded.num1, s.num1)";
  const cu = "CASE WHEN s.num1 >= excluded.num1 THEN s.num2 ELSE 0 END";
  // On the row read again: the window of now or the stored one, whichever is later, its count and end.
  const nix = `greatest(floor(nw / ${sz}), s.num1)`;
  const now = { cu: `CASE WHEN s.num1 >= floor(nw / ${sz}) THEN s.num2 ELSE 0 END`, we: `(${nix} + 1) * ${sz}` };
  return {
    columns: "num1, num2, expires_at_us",
    fresh: `floor(nw / ${sz}), ${COST}, (floor(nw / ${sz}) + 1) * ${sz}`,
    freshAdmits: `${COST} <= ${LIM}`,
    set: [["num1", ix], ["num2", `${cu} + ${COST}`], ["expires_at_us", `(${ix} + 1) * ${sz}`]],
    admits: `${cu} + ${COST} <= ${LIM}`,
    remaining: `${LIM} - s.num2`,
    reset: "ceil(s.expires_at_us / 1000)",
    mark: "s.num1",
    denial: {
      admits: `${now.cu} + ${COST} <= ${LIM}`,
      figures: `greatest(0, ${LIM} - ${now.cu}), ceil(${now.we} / 1000),
      CASE WHEN ${COST} > ${LIM} THEN -1 ELSE ceil((${now.we} - nw) / 1000) END`,
    },
  };
};

const slidingWindow = (): Charge => {
  const ix = "greatest(excluded.num1, s.num1)";
  const cu = "CASE WHEN s.num1 >= excluded.num1 THEN s.num2 ELSE 0 END";
  const pv = "CASE WHEN s.num1 >= excluded.num1 THEN s.num3 WHEN s.num1 = excluded.num1 - 1 THEN s.num2 ELSE 0 END";
  // bu: the room the previous window's weight leaves, for a window index and previous count.
  const bu = (at: string, prev: string): string =>
    `(${LIM} * ${PAR} - ${prev} * (${PAR} - greatest(0, floor((${NW} - ${at} * ${PAR} * 1000) / 1000))))`;
  const start = `floor(nw / (${PAR} * 1000))`;
  return {
    columns: "num1, num2, num3, expires_at_us",
    fresh: `${start}, ${COST}, 0, (${start} * ${PAR} + 2 * ${PAR}) * 1000`,
    freshAdmits: `${COST} * ${PAR} <= ${LIM} * ${PAR}`,
    set: [["num1", ix], ["num2", `${cu} + ${COST}`], ["num3", pv], ["expires_at_us", `(${ix} * ${PAR} + 2 * ${PAR}) * 1000`]],
    admits: `(${cu} + ${COST}) * ${PAR} <= ${bu(ix, `(${pv})`)}`,
    remaining: `greatest(0, floor((${bu("s.num1", "s.num3")} - s.num2 * ${PAR}) / ${PAR}))`,
    reset: `s.num1 * ${PAR} + 2 * ${PAR}`,
    mark: "s.num1",
    // Its retry time takes loops: the kind's apply, as the consume function runs it.
    declare: `
  st float8[]; o int := 1; i int := 2; c float8 := cost; ch boolean := true;
  ix float8; cu float8; pv float8; ws float8; el float8; bu float8; e0 float8; tat float8; mk float8; ex float8;`,
    denialApply: `  SELECT ARRAY[s.num1, s.num2, s.num3] INTO st FROM @S.@T s WHERE s.key = ky AND blocks IS NULL
    AND s.set_kinds = 's' AND s.nums IS NULL AND (s.blocked_until_us IS NULL OR s.blocked_until_us <= nw)
  FOR UPDATE OF s;
  IF st IS NOT NULL THEN
    r := array_fill(0::float8, ARRAY[5]);
${SLIDING_APPLY}    IF r[2] = 0 THEN RETURN r; END IF;
  END IF;
`,
  };
};

const CHARGES: Readonly<Record<CounterKind, () => Charge>> = { t: tokenBucket, f: fixedWindow, s: slidingWindow };

/** One kind's charge expressions (see {@link Charge}), for the functions here and the statement of sql/direct.ts. */
export const chargeOf = (kind: CounterKind): Charge => CHARGES[kind]();

/** The kinds charged by a statement and a function of their own (one policy of the kind; sql/direct.ts). */
export type CounterKind = "t" | "f" | "s";

/** The charge function of one kind (see above). */
const chargeFunction = (kind: CounterKind): string => {
  const c = CHARGES[kind]();
  const denial = c.denial === undefined ? c.denialApply ?? "" : `  SELECT ARRAY[0, 0, ${c.denial.figures}]::float8[] INTO r
  FROM @S.@T s WHERE s.key = ky AND blocks IS NULL
    AND s.set_kinds = '${kind}' AND s.nums IS NULL AND (s.blocked_until_us IS NULL OR s.blocked_until_us <= nw)
    AND NOT (${c.denial.admits})
  FOR UPDATE OF s;
  IF r IS NOT NULL THEN RETURN r; END IF;
`;
  return `CREATE OR REPLACE FUNCTION @S.@T_charge_${kind}(ky text, lim float8, par float8, cost float8, nw float8, blocks float8[])
  RETURNS float8[]
LANGUAGE plpgsql AS $fn$
DECLARE r float8[];${c.declare ?? ""}
BEGIN
  nw := coalesce(nw, floor(extract(epoch FROM clock_timestamp()) * 1000000)::float8);
  INSERT INTO @S.@T AS s (key, set_kinds, ${c.columns}) SELECT ky, '${kind}', ${c.fresh} WHERE ${c.freshAdmits}
  ON CONFLICT (key) DO UPDATE SET ${c.set.map(([column, value]) => `${column} = ${value}`).join(", ")}
  WHERE s.set_kinds = '${kind}' AND s.nums IS NULL AND (s.blocked_until_us IS NULL OR s.blocked_until_us <= nw)
    AND ${c.admits}
  RETURNING ARRAY[1, 1, ${c.remaining}, ${c.reset}, 0, ${c.mark}]::float8[] INTO r;
  IF r IS NOT NULL THEN RETURN r; END IF;
${denial}  RETURN @S.@T_consume(ky, '${kind}', ARRAY[lim], ARRAY[par], blocks, cost, nw, NULL, 0, 0);
END
$fn$;
`;
};

/** The charge functions, created by the migration after consume. */
export const CHARGE_FUNCTIONS: readonly string[] = (["t", "f", "s"] as const).map(chargeFunction);
