import { SWEEP_GRACE_US } from "./common.ts";
import type { SqlKind } from "./expr.ts";
import { FIXED_WINDOW_SQL } from "./fixed-window.ts";
import type { Names } from "./kernel.ts";
import { writeBlock } from "./procedures.ts";
import { SLIDING_LOG_SQL } from "./sliding-log.ts";
import { SLIDING_WINDOW_SQL } from "./sliding-window.ts";
import { TOKEN_BUCKET_SQL } from "./token-bucket.ts";
import { upsertBody } from "./upsert.ts";

/*
 * The common case, one policy charged by `limit()`, in a procedure of its kind: the kind's
 * decision made by the expressions of one statement (upsert.ts; the sliding log's in
 * log-upsert.ts), with nothing else to interpret: no loop over a policy list, no parsing of the
 * set's strings, no dispatch on the kind. It answers as the general consume does.
 *
 * A sliding log whose statement leaves the decision open (more entries left the window than it
 * searches) is decided in a transaction: the row and the key's block read in one locked
 * statement, the kind's apply fragment and its loop, the row written (and marked) only when it
 * admits, a denial's block written beside it. A new key is inserted with its state; when another
 * caller inserted it first (a duplicate key), the row is read again, locked, and decided again.
 */

type OneKind = SqlKind & { readonly upsert: NonNullable<SqlKind["upsert"]> };

/** The kinds with a procedure of their own (`consume_t`...); concurrency is reserved, never consumed. */
export const ONE_KINDS: readonly OneKind[] = [TOKEN_BUCKET_SQL, FIXED_WINDOW_SQL, SLIDING_WINDOW_SQL, SLIDING_LOG_SQL].map((kind) => {
  if (kind.upsert === undefined) throw new Error(`floodgate: the kind ${kind.code} has no single-statement charge`);
  return { ...kind, upsert: kind.upsert };
});

/** The procedure's name for a kind letter. */
export const oneProcedure = (code: string): string => `consume_${code}`;

/** `CREATE PROCEDURE` of one kind's consume: (base key, limit, parameter, block ms, cost, time, sweep rows). */
export const consumeOneProcedure = (n: Names, kind: OneKind): string =>
  `CREATE PROCEDURE ${
    n.create(oneProcedure(kind.code))
  }(IN bs VARBINARY(3000), IN L BIGINT, IN pr BIGINT, IN bm BIGINT, IN cost BIGINT, IN tm BIGINT, IN sw INT)
    MODIFIES SQL DATA
${upsertBody(n, kind, kind.upsert.undecided ? transaction(n, kind) : "")}`;

/** The key's block: when it ends (µs), 0 when none is in force. */
const BLOCK = (n: Names): string =>
  `COALESCE((SELECT z.n1 FROM ${n.table} z WHERE z.k = CONCAT(bs, ':b') AND z.kind = 'b' AND z.expires_us > nw), 0)`;

/** The decision in a transaction (`nw` and `bs`... in scope), answering as the procedure does. */
const transaction = (n: Names, kind: SqlKind): string =>
  `BEGIN
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
    -- The block is read after the row's lock is held: a block written before it is seen, one
    -- written after takes the mark off this row.
    SELECT s.kind, s.n1, s.n2, s.n3, s.entries, ${BLOCK(n)}
      INTO tk, a, b, c, lg, bu FROM ${n.table} s WHERE s.k = bs FOR UPDATE;
  END;
  IF fd = 0 THEN
    SELECT ${BLOCK(n)} INTO bu;
  END IF;
  IF fd = 0 OR tk <> '${kind.code}' THEN SET a = 0, b = 0, c = 0, lg = NULL; END IF;
  SET chg = IF(bu > 0, 0, 1);
${kind.apply}  IF ok = 1 AND chg = 1 THEN
    SET mk = IF(${"COALESCE(LENGTH(lg), 0)"} >= 8, CAST(CONV(HEX(RIGHT(lg, 8)), 16, 10) AS SIGNED), 0);
    IF fd = 1 THEN
      UPDATE ${n.table} SET kind = '${kind.code}', n1 = 1, n2 = 0, n3 = 0, entries = lg, expires_us = nx WHERE k = bs;
    ELSE
      BEGIN
        DECLARE CONTINUE HANDLER FOR 1062 SET dup = 1;
        INSERT INTO ${n.table} (k, kind, n1, n2, n3, entries, expires_us) VALUES (bs, '${kind.code}', 1, 0, 0, lg, nx);
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
END;
`;
