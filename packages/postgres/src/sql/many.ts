import { APPLY } from "./algorithms.ts";
import { BLANK_STATE, DECLARE, EACH, LONG_KEY, NOW, NUMS, WRITE } from "./common.ts";

/*
 * The compound step (RateLimitStore.consumeMany): several (policy set, key) pairs decided in one
 * call, one transaction, all charged or none. The same fragments as consume, pair after pair.
 *
 * 1. Locks and reads every pair's row in one fixed order (the keys sorted byte-wise), so that two compound
 *    calls naming the same keys in opposite orders wait for each other instead of deadlocking; a
 *    single-key call holds one row at a time and cannot close a cycle either. A key without a row
 *    gets a placeholder row (set_kinds '', read as no state) that holds its place as the lock
 *    does; a placeholder still unwritten at the end is deleted before the transaction commits,
 *    so no other transaction ever sees one.
 * 2. Reads the clock once, after every lock (as consume reads it after its one lock).
 * 3. Charges every pair on the state read (each kind's apply, as consume's charging pass), writing
 *    nothing until every pair has admitted; then writes every row. When any pair denies (a
 *    blocked one does), it decides every pair again on the state read, charging none: a denying pair's key
 *    starts the longest `block` of its denying policies, a blocked pair reports its block, and a
 *    log's entries that left the window are dropped, as a denied consume of that pair does.
 *
 * Arguments: ks (each pair's key), kss (each pair's kinds), lims_all, pars_all and blocks_all
 * (every pair's policies end to end; blocks_all NULL when no policy blocks), cost, nw (µs or NULL
 * for the database's clock). Answers [charged (1 or 0)] then per pair, in order, consume's answer
 * (marks included when charged).
 */

/** The per-pair variables, set from the arrays for pair j (its policies start after po). */
const PAIR = `k := hk[j]; kinds := kss[j]; n := length(kinds);
lims := lims_all[po + 1 : po + n]; pars := pars_all[po + 1 : po + n];
blocks := CASE WHEN blocks_all IS NULL THEN NULL ELSE blocks_all[po + 1 : po + n] END;
tidied := false;
`;

/** Pair j's row as the lock pass read it (a placeholder, or state of other kinds, reads as none). */
const RESTORE = `stored_kinds := skd[j]; st := sts[j]::float8[]; lg := lgs[j]::float8[]; bl := bls[j]; xp := xps[j]; found_row := true;
IF stored_kinds IS DISTINCT FROM kinds THEN st := ${BLANK_STATE}; lg := '{}'; xp := 0; bl := 0; END IF;
`;

/** Evaluates pair j on its state into r and `allowed`. */
const EVALUATE = `${RESTORE}r := array_fill(0::float8, ARRAY[1 + 4 * n]);
c := CASE WHEN cost > 0 THEN cost ELSE 1 END;
allowed := true; ch := false;
${
  EACH(`${APPLY}IF r[i] = 0 THEN allowed := false; END IF;
`)
}r[1] := CASE WHEN allowed AND bl <= nw THEN 1 ELSE 0 END;
`;

/** A blocked pair: every policy denied with 0 remaining, its reset and wait at least until the block ends. */
const OVERRIDE_BLOCKED = `FOR p IN 1..n LOOP
  i := 2 + (p - 1) * 4;
  r[i] := 0; r[i + 1] := 0;
  IF r[i + 2] < ceil(bl / 1000) THEN r[i + 2] := ceil(bl / 1000); END IF;
  IF r[i + 3] <> -1 AND r[i + 3] < ceil((bl - nw) / 1000) THEN r[i + 3] := ceil((bl - nw) / 1000); END IF;
END LOOP;
`;

const CONSUME_MANY = `CREATE OR REPLACE FUNCTION @S.@T_consume_many(ks text[], kss text[], lims_all float8[], pars_all float8[],
  blocks_all float8[], cost float8, nw float8) RETURNS float8[]
LANGUAGE plpgsql AS $fn$
${DECLARE}  k text; kinds text; lims float8[]; pars float8[]; blocks float8[];
  hk text[] := '{}'; made text[] := '{}'; res float8[]; all_ok boolean := true; j int; po int; np int := cardinality(ks);
  skd text[]; sts text[]; lgs text[]; bls float8[]; xps float8[]; nst text[]; nlg text[]; nbl float8[]; nxp float8[];
BEGIN
FOR j IN 1..np LOOP
  k := ks[j];
${LONG_KEY}  hk := hk || k;
END LOOP;
FOR j IN SELECT u.o::int FROM unnest(hk) WITH ORDINALITY AS u(x, o) ORDER BY u.x COLLATE "C" LOOP
  k := hk[j];
  LOOP
    SELECT s.set_kinds, ${NUMS}, coalesce(s.logs, '{}'), coalesce(s.blocked_until_us, 0), s.expires_at_us
      INTO stored_kinds, st, lg, bl, xp FROM @S.@T s WHERE s.key = k FOR UPDATE;
    EXIT WHEN FOUND;
    INSERT INTO @S.@T (key, set_kinds, nums, expires_at_us) VALUES (k, '', '{}', 0) ON CONFLICT (key) DO NOTHING;
    GET DIAGNOSTICS nrows = ROW_COUNT;
    IF nrows > 0 THEN
      made := made || k; stored_kinds := ''; st := '{}'; lg := '{}'; bl := 0; xp := 0;
      EXIT;
    END IF;
  END LOOP;
  skd[j] := stored_kinds; sts[j] := st::text; lgs[j] := lg::text; bls[j] := bl; xps[j] := xp;
END LOOP;
${NOW}-- Every pair charged on its state, nothing written yet: the common case, every pair admitted.
po := 0; res := ARRAY[1]::float8[];
IF cost <= 0 THEN all_ok := false; END IF;
FOR j IN 1..np LOOP
  EXIT WHEN NOT all_ok;
${PAIR}${RESTORE}  r := array_fill(0::float8, ARRAY[1 + 4 * n]);
  c := cost; ch := true; expiry := 0; marks := '{}';
${
  EACH(`${APPLY}IF r[i] = 0 THEN all_ok := false; END IF;
expiry := greatest(expiry, ex); marks := marks || mk;
`)
}  IF bl > nw THEN all_ok := false; END IF;
  r[1] := 1;
  res := res || r || marks;
  nst[j] := st::text; nlg[j] := lg::text; nbl[j] := bl; nxp[j] := greatest(expiry, bl);
  po := po + n;
END LOOP;
IF all_ok THEN
  FOR j IN 1..np LOOP
    k := hk[j]; kinds := kss[j]; st := nst[j]::float8[]; lg := nlg[j]::float8[]; bl := nbl[j]; xp := nxp[j]; found_row := true;
${WRITE}  END LOOP;
ELSE
  -- Refused: every pair decided again on the state read, charging nothing.
  res := ARRAY[0]::float8[];
  po := 0;
  FOR j IN 1..np LOOP
${PAIR}${EVALUATE}    IF bl > nw THEN
${OVERRIDE_BLOCKED}      IF tidied AND stored_kinds = kinds THEN UPDATE @S.@T s SET nums = st, logs = nullif(lg, '{}') WHERE s.key = k; END IF;
    ELSE
      bm := 0;
      IF r[1] = 0 AND cost > 0 AND blocks IS NOT NULL THEN
        FOR p IN 1..n LOOP
          IF r[2 + (p - 1) * 4] = 0 AND blocks[p] > bm THEN bm := blocks[p]; END IF;
        END LOOP;
      END IF;
      IF bm > 0 THEN
        bl := nw + bm * 1000;
        xp := greatest(xp, bl);
${OVERRIDE_BLOCKED}${WRITE}      ELSIF tidied AND stored_kinds = kinds THEN
        UPDATE @S.@T s SET nums = st, logs = nullif(lg, '{}') WHERE s.key = k;
      END IF;
    END IF;
    res := res || r;
    po := po + n;
  END LOOP;
END IF;
DELETE FROM @S.@T s WHERE s.key = ANY(made) AND s.set_kinds = '';
RETURN res;
END
$fn$;
`;

/** The compound step's function, created by the migration beside the others. */
export const CONSUME_MANY_FUNCTION: string = CONSUME_MANY;
