import { applyAll, BEGIN_WRITE, DECLARE, forEachPolicy, SET_ARGS, SWEEP } from "./common.ts";
import { nth } from "./expr.ts";
import type { Names } from "./kernel.ts";
import { MARKED, UNMARK } from "./expr.ts";

/*
 * The procedures a store calls, one CALL per operation (lease.ts has the lease's).
 *
 * consume (op 0 peek, 1 consume, 2 reserve) answers one row, `r`: "bu,now,allowed,per policy
 * (allowed,remaining,resetAt ms,retryAfterMs)" and, after a charged admission, one mark per
 * policy. `bu` is when the key's block ends (µs, 0: not blocked): the store then reports every
 * policy denied until then (the figures are those of the policies alone). Nothing is charged
 * while blocked; a charging denial by a policy with a `block` blocks the key in the same
 * transaction. A reservation's ledger row (`<base>:r:<id>`) holds its estimate (n1) and marks.
 */

const BLOCK_KEY = "CONCAT(bs, ':b')";

/**
 * Writes the key's block row, blocked until `bu` (every procedure that blocks a key writes it
 * here), then takes the mark of a key without a block off its first row (see upsert.ts): the
 * single-policy procedures then read the block row again before they charge.
 */
export const writeBlock = (n: Names): string =>
  `INSERT INTO ${n.table} (k, kind, n1, n2, n3, entries, expires_us) VALUES (${BLOCK_KEY}, 'b', bu, 0, 0, NULL, bu)
  ON DUPLICATE KEY UPDATE kind = 'b', n1 = bu, n2 = 0, n3 = 0, entries = NULL, expires_us = bu;
UPDATE ${n.table} SET ${UNMARK} WHERE k = bs AND ${MARKED};
`;

export function publicProcedures(n: Names): string[] {
  const consume = `CREATE PROCEDURE ${
    n.create("consume")
  }(${SET_ARGS}, IN cost BIGINT, IN tm BIGINT, IN op TINYINT, IN rid VARBINARY(100), IN ttl BIGINT, IN sw INT)
    MODIFIES SQL DATA
BEGIN
${DECLARE}DECLARE bu, bm BIGINT DEFAULT 0;
DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
IF op = 0 THEN
  SET cost = 1;
ELSE
  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
END IF;
-- One policy: read (with the block), decide and charge in one pass; several: decide all, then charge all.
IF CHAR_LENGTH(kinds) = 1 AND op > 0 THEN
${applyAll(n, "IF(bu > 0, 0, 1)", "1", true)}ELSE
${applyAll(n, "0", "IF(op > 0, 1, 0)", true)}  IF al = 1 AND op > 0 AND bu = 0 THEN
${applyAll(n, "1", "1")}  END IF;
END IF;
IF al = 0 AND op > 0 AND bu = 0 THEN
  ${
    forEachPolicy(
      `IF ${nth("nums", "3 * p + 3")} > bm AND ${nth("SUBSTRING(res, 2)", "4 * p + 1")} = 0 THEN SET bm = ${
        nth("nums", "3 * p + 3")
      }; END IF;\n`,
    )
  }  IF bm > 0 THEN
    SET bu = nw + bm * 1000;
    ${writeBlock(n)}  END IF;
ELSEIF al = 1 AND op = 2 AND bu = 0 THEN
  INSERT INTO ${n.table} (k, kind, n1, n2, n3, entries, expires_us)
    VALUES (CONCAT(bs, ':r:', rid), 'r', cost, 0, 0, SUBSTRING(mks, 2), nw + ttl * 1000);
END IF;
IF op > 0 THEN COMMIT; END IF;
${SWEEP(n)}SELECT CONCAT(bu, ',', nw, ',', IF(bu > 0, 0, al), res, IF(al = 1 AND op > 0 AND bu = 0, mks, '')) AS r;
END`;

  // Gives `cost` back to every policy, into its mark when `mks` lists one per policy.
  const refund = `CREATE PROCEDURE ${n.create("refund")}(${SET_ARGS}, IN cost BIGINT, IN tm BIGINT, IN mks_in TEXT)
    MODIFIES SQL DATA
BEGIN
${DECLARE}${BEGIN_WRITE}${
    forEachPolicy(`CALL ${n.local("load")}(kk, kd, nw, 2, fd, a, b, c, lg);
IF fd = 1 THEN
  CALL ${n.local("refund_one")}(kd, L, pr, nw, cost, IF(mks_in IS NULL, NULL, ${nth("mks_in", "p + 1")}), a, b, c, lg, nx);
  CALL ${n.local("save")}(kk, kd, a, b, c, lg, nx);
END IF;
`)
  }COMMIT;
END`;

  // Settles reservation `rid` at `act`: answers 1 when its ledger row was live (and deletes it).
  const settle = `CREATE PROCEDURE ${n.create("settle")}(${SET_ARGS}, IN rid VARBINARY(100), IN act BIGINT, IN tm BIGINT)
    MODIFIES SQL DATA
BEGIN
${DECLARE}DECLARE est, ex BIGINT;
DECLARE rec LONGBLOB;
DECLARE done INT DEFAULT 0;
${BEGIN_WRITE}SET fd = 1;
BEGIN
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET fd = 0;
  SELECT s.n1, s.entries, s.expires_us INTO est, rec, ex FROM ${n.table} s WHERE s.k = CONCAT(bs, ':r:', rid) AND s.kind = 'r' FOR UPDATE;
END;
IF fd = 1 THEN
  DELETE FROM ${n.table} WHERE k = CONCAT(bs, ':r:', rid);
  IF ex > nw AND CHAR_LENGTH(rec) - CHAR_LENGTH(REPLACE(rec, ',', '')) + 1 = CHAR_LENGTH(kinds) THEN
    ${
    forEachPolicy(`CALL ${n.local("load")}(kk, kd, nw, 2, fd, a, b, c, lg);
IF fd = 1 THEN
  CALL ${n.local("settle_one")}(kd, L, pr, nw, est, act, ${nth("rec", "p + 1")}, a, b, c, lg, nx);
  CALL ${n.local("save")}(kk, kd, a, b, c, lg, nx);
END IF;
`)
  }    SET done = 1;
  END IF;
END IF;
COMMIT;
SELECT done AS r;
END`;

  // Charges each policy what it has left, up to `cost` (a penalty found after the fact).
  const penalty = `CREATE PROCEDURE ${n.create("penalty")}(${SET_ARGS}, IN cost BIGINT, IN tm BIGINT)
    MODIFIES SQL DATA
BEGIN
${DECLARE}${BEGIN_WRITE}${
    forEachPolicy(`CALL ${n.local("load")}(kk, kd, nw, 1, fd, a, b, c, lg);
CALL ${n.local("apply")}(kd, L, pr, nw, 1, 0, a, b, c, lg, ok, rem, rst, rty, nx, mk);
IF rem > 0 THEN
  CALL ${n.local("apply")}(kd, L, pr, nw, LEAST(cost, rem), 1, a, b, c, lg, ok, rem, rst, rty, nx, mk);
  IF ok = 1 THEN CALL ${n.local("save")}(kk, kd, a, b, c, lg, nx); END IF;
END IF;
`)
  }COMMIT;
END`;

  // Blocks the key for `ms` from now, replacing any block it has.
  const block = `CREATE PROCEDURE ${n.create("block")}(IN bs VARBINARY(3000), IN ms BIGINT, IN tm BIGINT)
    MODIFIES SQL DATA
BEGIN
DECLARE bu BIGINT DEFAULT COALESCE(tm, ${"TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))"}) + ms * 1000;
${writeBlock(n)}END`;

  return [consume, refund, settle, penalty, block];
}
