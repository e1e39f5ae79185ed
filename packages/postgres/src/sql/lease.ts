import { APPLY, REFUND, tokenExpiry } from "./algorithms.ts";
import { BLANK_STATE, DECLARE, EACH, LONG_KEY, NOW, OVERRIDE_BLOCKED, POLICY, READ, UPDATE_ROW } from "./common.ts";

/*
 * The lease function: the Redis lease script (packages/core/src/stores/redis/lease-lua.ts) in
 * one transaction. It gives back previous leases' unspent units into what each was charged in
 * (once: their ledger rows are deleted), decides the request exactly as consume does, and, when
 * it is admitted and every policy has enough left, charges `g` extra units to every policy and
 * records the lease (its ledger row holds the reply as charged, the lease's end where the life
 * goes, so a retried call with the same id answers from it and charges nothing again).
 *
 * Arguments: req (the request's cost, 0 for none), want, life and minlife (µs), lid (the new
 * lease's id), ret_ids and ret_unspent (leases given back), the usual k, kinds, lims (a token
 * bucket's limit less its lease reserve), pars, nw. Reply, always 1 + 5n + 3 numbers: allowed,
 * per policy (allowed, remaining, resetAt, retryAfterMs), per policy the charge's mark (0 when
 * nothing was charged), g, the lease's life from now (µs), now (µs).
 */

/**
 * A token bucket's request (req units, spent now) and lease (g units, spent until wend), the lease
 * charged as if spent at its end, as the lease script's token-bucket `grant` fragment does: a
 * bucket that stays full meanwhile forgets refill, so units charged earlier than they are spent
 * would let a later decision on the key see up to a lease life's refill too many.
 */
const TOKEN_GRANT = `tat := greatest(st[o], nw) + req * par;
IF tat < wend THEN tat := wend; END IF;
nx := tat + g * par;
IF c <= lim AND nx - nw <= lim * par THEN
  r[i] := 1; r[i + 3] := 0;
  IF ch THEN
    st[o] := nx; r[i + 1] := floor((lim * par - (nx - nw)) / par); r[i + 2] := ceil(nx / 1000); mk := nx;
  END IF;
ELSE
  r[i] := 0; r[i + 3] := 0;
END IF;
IF NOT (ch AND r[i] = 1) THEN
  r[i + 1] := greatest(0, floor((lim * par - (tat - nw)) / par)); r[i + 2] := ceil(tat / 1000);
END IF;
ex := ${tokenExpiry("nx")};
`;

/** A request with a lease: each kind's grant (the token bucket's above), else APPLY at c = req + g. */
const GRANT = `IF kd = 't' THEN
${TOKEN_GRANT}ELSE
${APPLY}END IF;
`;

/** Evaluates every policy with `body` into a fresh r (nothing charged); `allowed` says whether all admit. */
const evalAll = (body: string): string =>
  `r := array_fill(0::float8, ARRAY[1 + 4 * n]); allowed := true; ch := false;
${
    EACH(`${body}IF r[i] = 0 THEN allowed := false; END IF;
`)
  }r[1] := CASE WHEN allowed THEN 1 ELSE 0 END;
`;

/** Charges every policy with `body` (already known to admit); r gets the figures after charging, marks the marks. */
const commitAll = (body: string): string =>
  `ch := true; marks := '{}'; expiry := 0;
${
    EACH(`${body}marks := marks || mk; expiry := greatest(expiry, ex);
`)
  }xp := greatest(xp, expiry);
`;

const EVAL_ALL = evalAll(APPLY);
const COMMIT_ALL = commitAll(APPLY);

export const LEASE_FUNCTION =
  `CREATE OR REPLACE FUNCTION @S.@T_lease(k text, kinds text, lims float8[], pars float8[], req float8, want float8,
  life float8, minlife float8, lid text, ret_ids text[], ret_unspent float8[], nw float8) RETURNS float8[]
LANGUAGE plpgsql AS $fn$
${DECLARE}  rn int; g float8; wend float8; rest float8; saved float8[];
BEGIN
${LONG_KEY}n := length(kinds); rn := 1 + 5 * n + 3;
-- The row first (a blank one for a new key), locked: returns and charges then write it in place.
LOOP
${READ}  EXIT WHEN found_row;
  INSERT INTO @S.@T (key, set_kinds, nums, logs, blocked_until_us, expires_at_us) VALUES (k, kinds, ${BLANK_STATE}, NULL, 0, 0)
    ON CONFLICT (key) DO NOTHING;
END LOOP;
${NOW}SELECT l.rec INTO rc FROM @S.@T_ledger l WHERE l.key = k AND l.id = lid AND l.expires_at_us > nw;
IF rc IS NOT NULL THEN
  rc[rn - 1] := greatest(0, rc[rn - 1] - nw); rc[rn] := nw;
  RETURN rc;
END IF;
FOR q IN 1..coalesce(cardinality(ret_ids), 0) LOOP
  rc := NULL;
  DELETE FROM @S.@T_ledger l WHERE l.key = k AND l.id = ret_ids[q] RETURNING l.rec, l.expires_at_us INTO rc, rc_xp;
  IF rc IS NOT NULL AND rc_xp > nw AND cardinality(rc) = rn THEN
    c := least(ret_unspent[q], rc[rn - 2]);
    IF c > 0 THEN
${
    EACH(`m := rc[1 + 4 * n + p];
${REFUND}`)
  }    END IF;
  END IF;
END LOOP;
c := CASE WHEN req > 0 THEN req ELSE 1 END;
${EVAL_ALL}-- A blocked key: denied as a consume is, nothing charged, no lease.
IF bl > nw THEN
${OVERRIDE_BLOCKED}  allowed := false;
END IF;
g := 0; marks := '{}';
IF allowed THEN
  g := want; wend := nw + life;
  FOR p IN 1..n LOOP
${POLICY}    rest := r[p * 4 - 1] - req;
    IF rest < greatest(ceil(lim / 100), 2 * c) THEN g := 0; ELSE g := least(g, floor(rest / 2)); END IF;
    IF kd <> 't' THEN wend := least(wend, (floor(nw / (par * 1000)) + 1) * par * 1000); END IF;
  END LOOP;
  -- What was wanted is for a whole lease life: a lease cut short by a window's end gets its share.
  IF wend - nw < life THEN g := least(g, floor(want * (wend - nw) / life)); END IF;
  IF wend - nw < minlife THEN g := 0; END IF;
  IF g > 0 THEN
    saved := r;
    c := req + g;
${evalAll(GRANT)}    IF allowed THEN
${commitAll(GRANT)}    ELSE
      g := 0; r := saved;
    END IF;
  END IF;
  IF g = 0 AND req > 0 THEN
    c := req;
${COMMIT_ALL}  END IF;
  life := wend - nw;
END IF;
IF req = 0 THEN r[1] := CASE WHEN g > 0 THEN 1 ELSE 0 END; END IF;
IF cardinality(marks) = n AND NOT (g = 0 AND req = 0) AND r[1] = 1 THEN r := r || marks;
ELSE r := r || array_fill(0::float8, ARRAY[n]); END IF;
r := r || ARRAY[g, CASE WHEN g > 0 THEN life ELSE 0 END, nw];
IF g > 0 THEN
  rc := r; rc[rn - 1] := nw + life;
  INSERT INTO @S.@T_ledger (key, id, rec, expires_at_us) VALUES (k, lid, rc, nw + (ceil(life / 1000) + 10000) * 1000)
    ON CONFLICT (key, id) DO NOTHING;
END IF;
${UPDATE_ROW}RETURN r;
END
$fn$;
`;
