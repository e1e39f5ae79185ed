import { entries, entry, SERVER_NOW, type SqlKind } from "./expr.ts";
import type { Names } from "./kernel.ts";
import { SWEEP_GRACE_US } from "./common.ts";
import { FIXED_WINDOW_SQL } from "./fixed-window.ts";
import { SLIDING_LOG_SQL } from "./sliding-log.ts";
import { SLIDING_WINDOW_SQL } from "./sliding-window.ts";
import { TOKEN_BUCKET_SQL } from "./token-bucket.ts";
import { upsertBody } from "./upsert.ts";
import { writeBlock } from "./procedures.ts";

/*
 * The common case, one policy charged by `limit()`, in a procedure of its kind. A kind whose
 * decision fits in expressions (token bucket, fixed and sliding window) is one statement
 * (upsert.ts). The sliding log, whose decision loops over its entries, runs the general
 * consume's transaction (the row and the key's block read in one locked statement, the kind's
 * apply fragment, the row written only when it admits, a denial's block written beside it) with
 * nothing else to interpret: no loop over a policy list, no parsing of the set's strings, no
 * dispatch on the kind, no placeholder row for a new key. It answers as the general consume does.
 *
 * A new key is inserted with its state; when another caller inserted it first (a duplicate key),
 * the procedure reads it again, locked, and decides again: no lost update, no gap lock.
 */

/** The kinds with a procedure of their own (`consume_t`...); concurrency is reserved, never consumed. */
export const ONE_KINDS: readonly SqlKind[] = [TOKEN_BUCKET_SQL, FIXED_WINDOW_SQL, SLIDING_WINDOW_SQL, SLIDING_LOG_SQL];

/** The procedure's name for a kind letter. */
export const oneProcedure = (code: string): string => `consume_${code}`;

/** The mark a charge leaves: the log's newest entry for a sliding log, else the state's first number. */
const mark = (code: string): string => code === "l" ? `IF(${entries("lg")} > 0, ${entry("lg", `${entries("lg")} - 1`)}, 0)` : "a";

/** `CREATE PROCEDURE` of one kind's consume: (base key, limit, parameter, block ms, cost, time, sweep rows). */
export const consumeOneProcedure = (n: Names, kind: SqlKind): string =>
  `CREATE PROCEDURE ${
    n.create(oneProcedure(kind.code))
  }(IN bs VARBINARY(3000), IN L BIGINT, IN pr BIGINT, IN bm BIGINT, IN cost BIGINT, IN tm BIGINT, IN sw INT)
    MODIFIES SQL DATA
${kind.upsert === undefined ? transactionBody(n, kind) : upsertBody(n, { ...kind, upsert: kind.upsert })}`;

/** The body of a kind without an upsert: the row and the key's block read locked, in a transaction. */
const transactionBody = (n: Names, kind: SqlKind): string =>
  `BEGIN
DECLARE nw BIGINT DEFAULT COALESCE(tm, ${SERVER_NOW});
DECLARE fd, ok, dup INT DEFAULT 0;
DECLARE chg INT DEFAULT 1;
DECLARE a, b, c, rem, rst, rty, nx, mk BIGINT DEFAULT 0;
DECLARE bu BIGINT DEFAULT 0;
DECLARE lg LONGBLOB;
DECLARE tk CHAR(1) DEFAULT '';
DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
START TRANSACTION;
decide: LOOP
  SET fd = 1, tk = '';
  BEGIN
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET fd = 0;
    SELECT s.kind, s.n1, s.n2, s.n3, s.entries,
        COALESCE((SELECT z.n1 FROM ${n.table} z WHERE z.k = CONCAT(bs, ':b') AND z.kind = 'b' AND z.expires_us > nw), 0)
      INTO tk, a, b, c, lg, bu FROM ${n.table} s WHERE s.k = bs FOR UPDATE;
  END;
  IF fd = 0 THEN
    SELECT COALESCE((SELECT z.n1 FROM ${n.table} z WHERE z.k = CONCAT(bs, ':b') AND z.kind = 'b' AND z.expires_us > nw), 0) INTO bu;
  END IF;
  IF fd = 0 OR tk <> '${kind.code}' THEN SET a = 0, b = 0, c = 0, lg = NULL; END IF;
  SET chg = IF(bu > 0, 0, 1);
${kind.apply}  IF ok = 1 AND chg = 1 THEN
    SET mk = ${mark(kind.code)};
    IF fd = 1 THEN
      UPDATE ${n.table} SET kind = '${kind.code}', n1 = a, n2 = b, n3 = c, entries = lg, expires_us = nx WHERE k = bs;
    ELSE
      BEGIN
        DECLARE CONTINUE HANDLER FOR 1062 SET dup = 1;
        INSERT INTO ${n.table} (k, kind, n1, n2, n3, entries, expires_us) VALUES (bs, '${kind.code}', a, b, c, lg, nx);
      END;
      IF dup = 1 THEN
        SET dup = 0;
        ITERATE decide;
      END IF;
    END IF;
  ELSEIF ok = 0 AND chg = 1 AND bm > 0 THEN
    SET bu = nw + bm * 1000;
    ${writeBlock(n)}
  END IF;
  LEAVE decide;
END LOOP;
COMMIT;
IF sw > 0 THEN
  BEGIN
    DECLARE CONTINUE HANDLER FOR SQLEXCEPTION BEGIN END;
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    DELETE FROM ${n.table} WHERE expires_us < nw - ${SWEEP_GRACE_US} LIMIT sw;
  END;
END IF;
SELECT CONCAT(bu, ',', nw, ',', IF(bu > 0, 0, ok), ',', ok, ',', rem, ',', rst, ',', rty, IF(ok = 1 AND bu = 0, CONCAT(',', mk), '')) AS r;
END`;
