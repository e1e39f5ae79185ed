import { APPLY, REFUND, SETTLE } from "./algorithms.ts";
import { DECLARE, EACH, LONG_KEY, NOW, OVERRIDE_BLOCKED, READ, WRITE } from "./common.ts";
import { FAST_PATH } from "./fast.ts";
import { LEASE_FUNCTION } from "./lease.ts";
import { CONSUME_MANY_FUNCTION } from "./many.ts";
import { CHARGE_FUNCTIONS } from "./counter.ts";

/*
 * The store's functions: each operation is one call of one PL/pgSQL function, one round trip,
 * one transaction. Every function that changes a key first locks its row (SELECT ... FOR UPDATE,
 * or INSERT ... ON CONFLICT DO NOTHING for a new key, deciding again when another transaction
 * inserted it meanwhile), so concurrent decisions on one key run one after the other on the
 * latest committed state at READ COMMITTED: no update is lost. Time is the database's
 * (clock_timestamp(), read after the lock) unless the caller passes one (`clock: "local"`).
 *
 * Names: `@S` is the schema, `@T` the table (both checked identifiers); the generator in
 * migration.ts replaces them.
 *
 * Common arguments: k (the key: prefix and escaped identifier), kinds (one letter per policy),
 * lims and pars (per policy its limit and parameter, as the Redis scripts'), nw (now in µs, or
 * NULL for the database's clock).
 */

/**
 * A peek or a denial writes nothing, except a log's entries that left the window (dropped as
 * every store drops them: a clock stepping back must not find them again).
 */
const WRITE_TIDIED = `IF tidied AND found_row AND stored_kinds = kinds THEN
  UPDATE @S.@T s SET nums = st, logs = nullif(lg, '{}') WHERE s.key = k;
END IF;
`;

/** Deletes up to `sweep` expired rows of each table (skipping rows in use): bounded, never waits. */
const SWEEP_BODY = `DELETE FROM @S.@T WHERE key IN (SELECT t.key FROM @S.@T t WHERE t.expires_at_us < nw
  ORDER BY t.expires_at_us LIMIT sweep FOR UPDATE SKIP LOCKED);
GET DIAGNOSTICS nrows = ROW_COUNT;
DELETE FROM @S.@T_ledger WHERE (key, id) IN (SELECT t.key, t.id FROM @S.@T_ledger t WHERE t.expires_at_us < nw
  ORDER BY t.expires_at_us LIMIT sweep FOR UPDATE SKIP LOCKED);
`;

/**
 * consume (cost > 0), peek (cost 0: a cost of 1, nothing charged) and reserve (rid set: the
 * ledger record [estimate, marks...] written beside the charge, expiring after ttl ms). Blocks
 * (per policy in ms, NULL when none blocks) start at a charging denial. Answers the store
 * result; `sweep` > 0 also deletes up to that many expired rows. The key's argument is named
 * `ky`, not `k` as in schema versions 1 and 2 (see migration.ts).
 */
const CONSUME = `CREATE OR REPLACE FUNCTION @S.@T_consume(ky text, kinds text, lims float8[], pars float8[], blocks float8[],
  cost float8, nw float8, rid text, ttl float8, sweep int) RETURNS float8[]
LANGUAGE plpgsql AS $fn$
${DECLARE}  k text := ky;
BEGIN
${LONG_KEY}n := length(kinds);
${FAST_PATH}LOOP
${READ}${NOW}r := array_fill(0::float8, ARRAY[1 + 4 * n]);
c := CASE WHEN cost > 0 THEN cost ELSE 1 END;
allowed := true; ch := false;
${
  EACH(`${APPLY}IF r[i] = 0 THEN allowed := false; END IF;
`)
}r[1] := CASE WHEN allowed THEN 1 ELSE 0 END;
IF bl > nw THEN
${OVERRIDE_BLOCKED}${WRITE_TIDIED}  EXIT;
END IF;
IF NOT allowed AND cost > 0 AND blocks IS NOT NULL THEN
  bm := 0;
  FOR p IN 1..n LOOP
    IF r[2 + (p - 1) * 4] = 0 AND blocks[p] > bm THEN bm := blocks[p]; END IF;
  END LOOP;
  IF bm > 0 THEN
    bl := nw + bm * 1000;
    xp := greatest(xp, bl);
${OVERRIDE_BLOCKED}${WRITE}    CONTINUE WHEN nrows = 0;
    EXIT;
  END IF;
END IF;
IF NOT allowed OR cost <= 0 THEN
${WRITE_TIDIED}  EXIT;
END IF;
ch := true; expiry := 0; marks := '{}';
${
  EACH(`${APPLY}expiry := greatest(expiry, ex); marks := marks || mk;
`)
}xp := greatest(expiry, bl);
IF rid IS NOT NULL THEN
  INSERT INTO @S.@T_ledger (key, id, rec, expires_at_us) VALUES (k, rid, ARRAY[cost] || marks, floor(nw + ttl * 1000))
    ON CONFLICT (key, id) DO NOTHING;
END IF;
${WRITE}IF nrows = 0 THEN
  DELETE FROM @S.@T_ledger l WHERE l.key = k AND l.id = rid;
  CONTINUE;
END IF;
r := r || marks;
EXIT;
END LOOP;
IF sweep > 0 THEN
${SWEEP_BODY}END IF;
RETURN r;
END
$fn$;
`;

/** refund: up to cost back into each policy's mark (marks NULL: into the current state). */
const REFUND_FN = `CREATE OR REPLACE FUNCTION @S.@T_refund(k text, kinds text, lims float8[], pars float8[], cost float8, nw float8,
  mks float8[]) RETURNS void
LANGUAGE plpgsql AS $fn$
${DECLARE}BEGIN
${LONG_KEY}n := length(kinds);
${READ}IF NOT found_row OR stored_kinds IS DISTINCT FROM kinds THEN RETURN; END IF;
${NOW}c := cost; expiry := 0;
${
  EACH(`m := mks[p]; c := cost;
${REFUND}expiry := greatest(expiry, ex);
`)
}xp := greatest(expiry, bl);
${WRITE}END
$fn$;
`;

/**
 * settle: reads and deletes the ledger record rid; none, or an expired one, answers false and
 * changes nothing; else each policy settles the estimate at `act` into its mark.
 */
const SETTLE_FN = `CREATE OR REPLACE FUNCTION @S.@T_settle(k text, kinds text, lims float8[], pars float8[], rid text, act float8,
  nw float8) RETURNS boolean
LANGUAGE plpgsql AS $fn$
${DECLARE}BEGIN
${LONG_KEY}n := length(kinds);
${READ}${NOW}DELETE FROM @S.@T_ledger l WHERE l.key = k AND l.id = rid RETURNING l.rec, l.expires_at_us INTO rc, rc_xp;
IF rc IS NULL OR rc_xp <= nw THEN RETURN false; END IF;
IF NOT found_row OR stored_kinds IS DISTINCT FROM kinds OR cardinality(rc) <> n + 1 THEN RETURN true; END IF;
es := rc[1]; ac := act; expiry := 0;
${
  EACH(`m := rc[1 + p];
${SETTLE}expiry := greatest(expiry, ex);
`)
}xp := greatest(expiry, bl);
${WRITE}RETURN true;
END
$fn$;
`;

/**
 * admin: op 'p' a penalty of amount units (each policy takes what it has left, up to it), 'b' a
 * block of amount ms from now, 'u' lifts the block, 'r' deletes the key's row.
 */
const ADMIN_FN = `CREATE OR REPLACE FUNCTION @S.@T_admin(k text, kinds text, lims float8[], pars float8[], op text, amount float8,
  nw float8) RETURNS void
LANGUAGE plpgsql AS $fn$
${DECLARE}BEGIN
${LONG_KEY}IF op = 'r' THEN
  -- The ledger stays, as on Redis: a reservation made before the reset still settles (into nothing).
  DELETE FROM @S.@T s WHERE s.key = k;
  RETURN;
END IF;
n := length(kinds);
LOOP
${READ}${NOW}IF op = 'u' THEN
  IF NOT found_row OR bl <= 0 THEN RETURN; END IF;
  bl := 0;
ELSIF op = 'b' THEN
  bl := nw + amount * 1000;
ELSE
  expiry := xp;
  r := array_fill(0::float8, ARRAY[5]);
${
  EACH(`c := 1; ch := false; i := 2;
${APPLY}c := least(amount, r[3]);
IF c > 0 THEN
  ch := true;
  IF kd IN ('l', 'c') THEN lo := lo - st[o]::int; END IF;
${APPLY}expiry := greatest(expiry, ex);
END IF;
`)
}  xp := expiry;
END IF;
xp := greatest(xp, bl);
${WRITE}EXIT WHEN nrows > 0;
END LOOP;
END
$fn$;
`;

/** sweep: deletes up to `sweep` expired rows of each table; answers the state rows deleted. */
const SWEEP_FN = `CREATE OR REPLACE FUNCTION @S.@T_sweep(sweep int, nw float8) RETURNS int
LANGUAGE plpgsql AS $fn$
DECLARE nrows int;
BEGIN
IF nw IS NULL THEN nw := floor(extract(epoch FROM clock_timestamp()) * 1000000)::float8; END IF;
${SWEEP_BODY}RETURN nrows;
END
$fn$;
`;

/** Every function of the store, in the order the migration creates them. */
export const FUNCTIONS: readonly string[] = [
  CONSUME,
  ...CHARGE_FUNCTIONS,
  REFUND_FN,
  SETTLE_FN,
  ADMIN_FN,
  SWEEP_FN,
  LEASE_FUNCTION,
  CONSUME_MANY_FUNCTION,
];
