import { MARKED, SERVER_NOW, type SqlKind, UNMARK, type UpsertKind } from "./expr.ts";
import type { Names } from "./kernel.ts";
import { SWEEP_GRACE_US } from "./common.ts";
import { writeBlock } from "./procedures.ts";

/*
 * One policy consumed by one statement: the kind's decision made by the expressions of an UPDATE
 * (or an upsert, `INSERT ... ON DUPLICATE KEY UPDATE`) in the session's autocommit, so one
 * transaction that locks the row, reads its latest state and writes it. On a denial every column
 * keeps its value: nothing is charged, nothing is written. What it decided comes back in user
 * variables (`@fg_...`, the session's, set by every call): an admission is answered from them; a
 * denial runs the kind's apply fragment on the state the statement read, for its figures (and
 * checks that it denies too), then writes the key's block when the policy has one.
 *
 * The key's block lives in a row of its own (`<key>:b`), which every procedure reads. So that a
 * decision need not read it, the policy's row carries a mark (expr.ts, MARKED: an empty `entries`
 * for the counters, `n1 = 1` for the log, what their state does not use), meaning "no block since
 * this row was charged": every procedure that blocks a key takes the mark off its first row
 * (procedures.ts, writeBlock) after writing the block row.
 * The fast path is one UPDATE of the row of this kind that carries the mark. Without one (a new
 * key, a row written by another procedure, a block written since), the block row is read, then
 * the upsert charges and marks the row, then the block row is read again: a block written
 * between the two reads, whose writer found the row not yet marked, takes the mark off here. A
 * block in force, or a cost above the limit, skips the upsert: the row is read without a lock and
 * decided without a charge.
 */

/** When the key's block ends (µs), 0 when it has none in force. */
const blockRead = (n: Names): string =>
  `COALESCE((SELECT MAX(z.n1) FROM ${n.table} z WHERE z.k = CONCAT(bs, ':b') AND z.kind = 'b' AND z.expires_us > nw), 0)`;

/**
 * The update of the row's columns: state and decision in the first assignment, then the columns.
 * The variables are assigned as the arguments of one CONCAT_WS, which evaluates them in order and
 * cannot be folded away (an `(@v := x) IS NULL` of a NOT NULL `x` is folded to false unevaluated).
 * The assignments run left to right, each reading the columns assigned before it: every read of
 * the old row is in the first.
 */
const assignments = (code: string, u: Pick<UpsertKind, "pre" | "columns">): string =>
  `kind = IF(LENGTH(CONCAT_WS(',', ${u.pre.map((p) => `(${p})`).join(", ")})) > 0 AND @fg_ok, '${code}', kind),
    ${u.columns}`;

/** The upsert: a new row's VALUES set the variables as admitted (a cost within the limit fits a new key). */
const upsertStatement = (n: Names, code: string, u: UpsertKind): string =>
  `INSERT INTO ${n.table} (k, kind, n1, n2, n3, entries, expires_us)
  VALUES (bs, '${code}', ${u.insert.join(", ")})
  ON DUPLICATE KEY UPDATE
    ${assignments(code, u)};
`;

/** The sweep after a write, when the caller asks for one (`sw` rows); a failure skips it. */
const SWEEP = (n: Names): string =>
  `IF sw > 0 THEN
  BEGIN
    DECLARE CONTINUE HANDLER FOR SQLEXCEPTION BEGIN END;
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    DELETE FROM ${n.table} WHERE expires_us < nw - ${SWEEP_GRACE_US} LIMIT sw;
  END;
END IF;
`;

/**
 * The body of `consume_<code>`: same answer as the general consume. `decide`, for a kind whose
 * statements can leave the decision open (`undecided`), decides in a transaction and answers.
 */
export const upsertBody = (n: Names, kind: SqlKind & { upsert: UpsertKind }, decide = ""): string =>
  `proc: BEGIN
DECLARE nw BIGINT DEFAULT COALESCE(tm, ${SERVER_NOW});
DECLARE bu BIGINT DEFAULT 0;
IF cost <= L THEN
  -- An UPDATE of one row by its whole primary key locks that record only, at any isolation level.
  SET @fg_ok = NULL${kind.upsert.init};
  UPDATE ${n.table} SET ${assignments(kind.code, kind.upsert.fast ?? kind.upsert)}
    WHERE k = bs AND kind = '${kind.code}' AND ${kind.upsert.marked};
  IF ${kind.upsert.matched} IS NULL THEN
    SELECT ${blockRead(n)} INTO bu;
    IF bu = 0 THEN
      -- Read committed: at REPEATABLE READ a missing row's duplicate check would lock its gap.
      SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
      ${upsertStatement(n, kind.code, kind.upsert)}      IF @fg_ok AND ${blockRead(n)} > 0 THEN
        UPDATE ${n.table} SET ${UNMARK} WHERE k = bs AND ${MARKED};
      END IF;
    END IF;
  END IF;
  -- A session out of autocommit (against the store's requirement) would keep the row locked.
  IF @@autocommit = 0 THEN COMMIT; END IF;
  IF bu = 0 AND @fg_ok THEN
    ${SWEEP(n)}    SELECT CONCAT('0,', nw, ',1,1,', ${kind.upsert.admitted[0]}, ',', ${kind.upsert.admitted[1]}, ',0,', ${
    kind.upsert.admitted[2]
  }) AS r;
    LEAVE proc;
  END IF;
${
    kind.upsert.undecided
      ? `  IF bu = 0 AND @fg_ok IS NULL THEN
${decide}    LEAVE proc;
  END IF;
`
      : ""
  }ELSE
  SELECT ${blockRead(n)} INTO bu;
END IF;
BEGIN
  DECLARE ok INT DEFAULT 0;
  DECLARE chg INT DEFAULT IF(bu > 0, 0, 1);
  DECLARE a, b, c, rem, rst, rty, nx BIGINT DEFAULT 0;
  DECLARE tk CHAR(1);
  DECLARE lg LONGBLOB;
  IF bu = 0 AND cost <= L THEN
    ${kind.upsert.restore}  ELSE
    SELECT MAX(s.kind), MAX(s.n1), MAX(s.n2), MAX(s.n3), MAX(s.entries) INTO tk, a, b, c, lg FROM ${n.table} s WHERE s.k = bs;
    IF tk IS NULL OR tk <> '${kind.code}' THEN SET a = 0, b = 0, c = 0, lg = NULL; END IF;
  END IF;
${kind.apply}  IF ok = 1 AND bu = 0 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'floodgate: the statement and the apply fragment disagree';
  END IF;
  IF chg = 1 AND bm > 0 THEN
    SET bu = nw + bm * 1000;
    ${writeBlock(n)}  END IF;
  ${SWEEP(n)}  SELECT CONCAT(bu, ',', nw, ',0,', ok, ',', rem, ',', rst, ',', rty) AS r;
END;
END`;
