import { applyAll, BEGIN_WRITE, DECLARE, forEachPolicy, SET_ARGS, SWEEP } from "./common.ts";
import { APPLY, type Names } from "./kernel.ts";
import { ceilMs, nth } from "./expr.ts";

/**
 * A token bucket's request (req units, spent now) and lease (g units, spent until wend), the lease
 * charged as if spent at its end, as the Redis lease script's token-bucket `grant` fragment and
 * evaluateState do: a bucket that stays full meanwhile forgets refill, so units charged earlier
 * than they are spent would let a later decision on the key see up to a lease life's refill too many.
 */
const TOKEN_GRANT = `BEGIN
DECLARE tat, nxt, tau BIGINT;
SET tau = L * pr, tat = GREATEST(a, nw) + req * pr;
IF tat < wend THEN SET tat = wend; END IF;
SET nxt = tat + g * pr, nx = nxt;
IF cost <= L AND nxt - nw <= tau THEN SET ok = 1, rty = 0; ELSE SET ok = 0, rty = 0; END IF;
IF ok = 1 AND chg = 1 THEN
  SET a = nxt, rem = (tau - (nxt - nw)) DIV pr, rst = ${ceilMs("nxt")};
ELSE
  SET rem = GREATEST(0, tau - (tat - nw)) DIV pr, rst = ${ceilMs("tat")};
END IF;
END;
SET mk = a;
`;

/** A request with a lease: the token bucket's grant above, every other kind's apply at cost = req + g. */
const GRANT = `IF kd = 't' THEN
${TOKEN_GRANT}ELSE
${APPLY}END IF;
`;

/*
 * The lease, as the Redis lease script (core's stores/redis/lease-lua.ts), in one transaction:
 * returns previous leases' unspent units into what each was charged in (once: a return deletes
 * the record first), decides the request exactly as consume does and, when it is admitted and
 * every policy has enough left, charges `g` extra units to every policy and records the lease.
 *
 * `req` the request's cost (0: only a refresh or returns), `want` the units wanted, `life` and
 * `minlife` the longest and shortest life worth granting (µs), `lid` the new lease's id, `rets`
 * "id:unspent,id:unspent..." the leases given back. The set's limits are the leased ones (a
 * token bucket's capacity less its reserve). Answers `r`: "allowed, per policy (allowed,
 * remaining, resetAt ms, retryAfterMs), per policy the mark (0 when nothing was charged), g,
 * life (µs), now (µs)". The record `<base>:l:<id>` holds that answer up to g, the lease's end
 * (n1) and g (n2): a retried call with the same id answers from it and charges nothing again.
 */

/**
 * A blocked key (its block row live): the request denied as consume denies it, every policy with
 * 0 remaining and a reset and wait at least until the block ends; `al` 0, so nothing is charged
 * and no lease granted (the returns before it still count).
 */
const BLOCKED = (n: Names): string =>
  `SELECT COALESCE((SELECT z.n1 FROM ${n.table} z WHERE z.k = CONCAT(bs, ':b') AND z.kind = 'b' AND z.expires_us > nw), 0) INTO bu;
IF bu > 0 THEN
  SET figs = '';
  ${
    forEachPolicy(
      `SET figs = CONCAT(figs, ',0,0,', GREATEST(${nth("SUBSTRING(res, 2)", "4 * p + 3")}, ${ceilMs("bu")}), ',', IF(${
        nth("SUBSTRING(res, 2)", "4 * p + 4")
      } = -1, -1, GREATEST(${nth("SUBSTRING(res, 2)", "4 * p + 4")}, ${ceilMs("bu - nw")})));
`,
    )
  }  SET res = figs, al = 0;
END IF;
`;

export function leaseProcedure(n: Names): string {
  return `CREATE PROCEDURE ${n.create("lease")}(${SET_ARGS}, IN req BIGINT, IN want BIGINT, IN life BIGINT, IN minlife BIGINT,
  IN tm BIGINT, IN lid VARBINARY(100), IN rets TEXT, IN sw INT)
    MODIFIES SQL DATA
proc: BEGIN
${DECLARE}DECLARE g, wend, rest, cost, un, q, nr, en, bu BIGINT DEFAULT 0;
DECLARE figs TEXT;
DECLARE rec LONGBLOB;
DECLARE item TEXT;
${BEGIN_WRITE}SET fd = 1;
BEGIN
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET fd = 0;
  SELECT s.entries, s.n1 INTO rec, en FROM ${n.table} s WHERE s.k = CONCAT(bs, ':l:', lid) AND s.kind = 'l' AND s.expires_us > nw FOR UPDATE;
END;
IF fd = 1 THEN
  COMMIT;
  SELECT CONCAT(rec, ',', GREATEST(0, en - nw), ',', nw) AS r;
  LEAVE proc;
END IF;
SET nr = IF(rets = '', 0, CHAR_LENGTH(rets) - CHAR_LENGTH(REPLACE(rets, ',', '')) + 1), q = 1;
WHILE q <= nr DO
  SET item = SUBSTRING_INDEX(SUBSTRING_INDEX(rets, ',', q), ',', -1), fd = 1;
  BEGIN
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET fd = 0;
    SELECT s.entries, s.n2 INTO rec, g FROM ${n.table} s
      WHERE s.k = CONCAT(bs, ':l:', SUBSTRING_INDEX(item, ':', 1)) AND s.kind = 'l' AND s.expires_us > nw FOR UPDATE;
  END;
  IF fd = 1 THEN
    DELETE FROM ${n.table} WHERE k = CONCAT(bs, ':l:', SUBSTRING_INDEX(item, ':', 1));
    SET cost = LEAST(CAST(SUBSTRING_INDEX(item, ':', -1) AS SIGNED), g);
    IF cost > 0 THEN
      ${
    forEachPolicy(`CALL ${n.local("load")}(kk, kd, nw, 2, fd, a, b, c, lg);
IF fd = 1 THEN
  CALL ${n.local("refund_one")}(kd, L, pr, nw, cost, ${nth("rec", "4 * n + 2 + p")}, a, b, c, lg, nx);
  CALL ${n.local("save")}(kk, kd, a, b, c, lg, nx);
END IF;
`)
  }    END IF;
  END IF;
  SET q = q + 1;
END WHILE;
SET cost = IF(req > 0, req, 1), g = want, wend = nw + life;
${applyAll(n, "0", "1")}${BLOCKED(n)}${
    forEachPolicy(`SET rest = ${nth("SUBSTRING(res, 2)", "4 * p + 2")} - req;
IF rest < GREATEST((L + 99) DIV 100, 2 * cost) THEN SET g = 0; ELSE SET g = LEAST(g, rest DIV 2); END IF;
IF kd <> 't' THEN SET wend = LEAST(wend, (nw DIV (pr * 1000) + 1) * pr * 1000); END IF;
`)
  }SET ok = al;
IF al = 0 THEN
  SET g = 0;
ELSE
  -- What was wanted is for a whole lease life: a lease cut short by a window's end gets its share.
  IF wend - nw < life THEN SET g = LEAST(g, (want * (wend - nw)) DIV life); END IF;
  IF wend - nw < minlife THEN SET g = 0; END IF;
  IF g > 0 THEN
    SET cost = req + g;
    ${applyAll(n, "0", "1", false, GRANT)}    IF al = 1 THEN
      ${applyAll(n, "1", "1", false, GRANT)}    ELSE
      SET g = 0;
    END IF;
  END IF;
  IF g = 0 AND req > 0 THEN
    SET cost = req;
    ${applyAll(n, "1", "1")}  END IF;
  SET life = wend - nw;
END IF;
IF req = 0 THEN SET ok = g > 0; END IF;
IF ok = 0 OR (g = 0 AND req = 0) OR mks = '' THEN SET mks = REPEAT(',0', CHAR_LENGTH(kinds)); END IF;
SET rec = CONCAT(ok, res, mks, ',', g);
IF g > 0 THEN
  INSERT INTO ${n.table} (k, kind, n1, n2, n3, entries, expires_us)
    VALUES (CONCAT(bs, ':l:', lid), 'l', nw + life, g, 0, rec, nw + life + 10000000);
END IF;
COMMIT;
${SWEEP(n)}SELECT CONCAT(rec, ',', IF(g > 0, life, 0), ',', nw) AS r;
END`;
}
