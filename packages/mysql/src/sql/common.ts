import { nth, SERVER_NOW } from "./expr.ts";
import { APPLY, loadBlock, type Names, saveStatement } from "./kernel.ts";

/*
 * What the public procedures share. Their arguments describe the policy set in two strings:
 * `kinds`, one kind letter per policy, and `nums`, per policy its limit, its parameter and its
 * `block` in ms, comma-separated. `bs` is the identifier's base key, `tm` the time in µs (NULL:
 * the server's clock).
 */

/** The set's arguments, first in every public procedure. */
export const SET_ARGS = "IN bs VARBINARY(3000), IN kinds VARCHAR(32), IN nums VARCHAR(2048)";

/** Variables every public procedure declares, and its clock. */
export const DECLARE = `DECLARE nw BIGINT DEFAULT COALESCE(tm, ${SERVER_NOW});
DECLARE n, p, fd, ok, al, chg INT DEFAULT 0;
DECLARE L, pr, a, b, c, rem, rst, rty, nx, mk BIGINT;
DECLARE lg LONGBLOB;
DECLARE kd CHAR(1);
DECLARE kk VARBINARY(3072);
DECLARE res, mks TEXT DEFAULT '';
`;

/**
 * The transaction of a writing procedure: READ COMMITTED, so that a locking read of a missing
 * row takes no gap lock (two callers on a new key would deadlock on their gap locks), and rolled
 * back on any error.
 */
export const BEGIN_WRITE = `DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
START TRANSACTION;
`;

/** A loop over the set's policies, with `kd`, `L`, `pr` and the policy's row key `kk` set. */
export const forEachPolicy = (body: string): string =>
  `SET n = CHAR_LENGTH(kinds), p = 0;
WHILE p < n DO
SET kd = SUBSTRING(kinds, p + 1, 1), L = ${nth("nums", "3 * p + 1")}, pr = ${nth("nums", "3 * p + 2")};
SET kk = IF(p = 0, bs, CONCAT(bs, ':', p));
${body}SET p = p + 1;
END WHILE;
`;

/**
 * Applies the variable `cost` to every policy (charging it when `chg` is 1, and then writing each row and its
 * mark): `res` gets the figures, `mks` the marks, `al` whether every policy admitted it. With
 * `block`, the first read also reads the key's block into `bu` (see loadBlock).
 */
export const applyAll = (n: Names, chg: string, lock: string, block = false, apply: string = APPLY): string =>
  `SET res = '', mks = '', al = 1;
${
    forEachPolicy(`${loadBlock(n, lock, block)}SET chg = ${chg};
${apply}IF ok = 0 THEN SET al = 0; END IF;
${
      chg !== "0"
        ? `IF ok = 1 AND chg = 1 THEN ${saveStatement(n)}SET mks = CONCAT(mks, ',', mk); END IF;\n`
        : ""
    }SET res = CONCAT(res, ',', ok, ',', rem, ',', rst, ',', rty);
`)
  }`;

/**
 * How long past its expiry a row is left to the writes' sweeps (µs): a key that comes back within
 * it (a token bucket that refills fast is full again, so expired, soon after each charge) finds
 * its row and updates it, where a swept row would be deleted and inserted again. `store.sweep()`
 * deletes every expired row.
 */
export const SWEEP_GRACE_US = 60_000_000;

/** A bounded sweep of expired rows after the transaction, when the caller asks for one (`sw` rows). */
export const SWEEP = (n: Names): string => `IF sw > 0 THEN CALL ${n.local("sweep")}(nw - ${SWEEP_GRACE_US}, sw); END IF;\n`;

/**
 * The sweep: at most `lim` rows expired before `nw`; a failure (a lock wait, a deadlock) skips it.
 * READ COMMITTED, as the decisions: at the session's default REPEATABLE READ its range scan would
 * lock gaps of the expiry index that concurrent decisions move their rows' expiries into.
 */
export const sweepProcedure = (n: Names): string =>
  `CREATE PROCEDURE ${n.create("sweep")}(IN nw BIGINT, IN lim INT)
    MODIFIES SQL DATA
BEGIN
DECLARE CONTINUE HANDLER FOR SQLEXCEPTION BEGIN END;
SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
DELETE FROM ${n.table} WHERE expires_us < nw LIMIT lim;
END`;
