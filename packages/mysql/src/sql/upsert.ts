import { SERVER_NOW, type SqlKind, type UpsertKind } from "./expr.ts";
import type { Names } from "./kernel.ts";
import { SWEEP_GRACE_US } from "./common.ts";

/*
 * One policy consumed as one upsert: the kind's decision made by the expressions of an
 * `INSERT ... ON DUPLICATE KEY UPDATE`, a statement of its own in the session's autocommit, so
 * one transaction that locks the row, reads its latest state and writes it. On a denial every
 * column keeps its value: nothing is charged, nothing is written. What it decided comes back in
 * user variables (`@fg_...`, the session's, each set by every call): a new row's VALUES set them
 * as admitted (a cost within the limit always fits a new key), the update's expressions as
 * decided on the row's state. Two callers on a new key queue on the key's lock: the second
 * updates what the first inserted.
 *
 * An admission is answered from those variables in the same SELECT that returns the answer. A
 * denial runs the kind's apply fragment on the state the upsert read, for its figures (and checks
 * that it denies too), then writes the key's block when the policy has one. A blocked key's
 * figures are those of its policy alone, as the general consume answers them.
 *
 * The key's block row is read before, without a lock, in its own statement (MySQL refuses a
 * subquery on the table an INSERT writes). A block in force, or a cost above the limit, skips the
 * upsert: the row is read without a lock and decided without a charge.
 */

/** When the key's block ends (µs), 0 when it has none in force. */
const blockRead = (n: Names): string =>
  `COALESCE((SELECT MAX(z.n1) FROM ${n.table} z WHERE z.k = CONCAT(bs, ':b') AND z.kind = 'b' AND z.expires_us > nw), 0)`;

/**
 * The upsert of kind `code`: state and decision in the first assignment, then the columns. The
 * variables are assigned as the arguments of one CONCAT_WS, which evaluates them in order and
 * cannot be folded away (an `(@v := x) IS NULL` of a NOT NULL `x` is folded to false unevaluated).
 * With `fold` (MariaDB), the key's block is read in the same statement, by the key's own value:
 * a block in force makes it NULL, the statement fails (1048) and writes nothing.
 */
const upsertStatement = (n: Names, code: string, u: UpsertKind, fold: boolean): string =>
  `INSERT INTO ${n.table} (k, kind, n1, n2, n3, entries, expires_us)
  VALUES (${fold ? `IF((@fg_bu := ${blockRead(n)}) = 0, bs, NULL)` : "bs"}, '${code}', @fg_n1 := ${u.insert[0]}, @fg_n2 := ${
    u.insert[1]
  }, @fg_n3 := ${u.insert[2]}, NULLIF(@fg_ok := 1, 1), @fg_nx := ${u.insert[3]})
  ON DUPLICATE KEY UPDATE
    kind = IF(LENGTH(CONCAT_WS(',', ${u.pre.map((p) => `(${p})`).join(", ")})) > 0 AND @fg_ok, '${code}', kind),
    n1 = IF(@fg_ok, @fg_n1, n1), n2 = IF(@fg_ok, @fg_n2, n2), n3 = IF(@fg_ok, @fg_n3, n3),
    entries = IF(@fg_ok, NULL, entries), expires_us = IF(@fg_ok, @fg_nx, expires_us);
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
 * The body of `consume_<code>` for a kind with an upsert: same arguments and answer as the
 * transactional one. `fold`: the block read inside the upsert (MariaDB), else a statement before.
 */
export const upsertBody = (n: Names, kind: SqlKind & { upsert: UpsertKind }, fold: boolean): string =>
  `proc: BEGIN
DECLARE nw BIGINT DEFAULT COALESCE(tm, ${SERVER_NOW});
DECLARE bu BIGINT DEFAULT 0;
${
    fold ? "" : `SELECT ${blockRead(n)} INTO bu;
`
  }IF bu = 0 AND cost <= L THEN
${
    fold
      ? `  BEGIN
    DECLARE CONTINUE HANDLER FOR 1048 SET bu = @fg_bu, @fg_ok = 0;
    -- At REPEATABLE READ the block's read would take a shared lock (and deadlock with inserts).
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    ${upsertStatement(n, kind.code, kind.upsert, true)}  END;
`
      : `  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  ${upsertStatement(n, kind.code, kind.upsert, false)}`
  }  -- A session out of autocommit (against the store's requirement) would keep the row locked.
  IF @@autocommit = 0 THEN COMMIT; END IF;
  IF @fg_ok THEN
    ${SWEEP(n)}    SELECT CONCAT('0,', nw, ',1,1,', ${kind.upsert.admitted[0]}, ',', ${kind.upsert.admitted[1]}, ',0,', ${
    kind.upsert.admitted[2]
  }) AS r;
    LEAVE proc;
  END IF;
END IF;
${
    fold
      ? `IF cost > L THEN SELECT ${blockRead(n)} INTO bu; END IF;
`
      : ""
  }BEGIN
  DECLARE ok INT DEFAULT 0;
  DECLARE chg INT DEFAULT IF(bu > 0, 0, 1);
  DECLARE a, b, c, rem, rst, rty, nx BIGINT DEFAULT 0;
  DECLARE tk CHAR(1);
  IF bu = 0 AND cost <= L THEN
    SET a = @fg_a, b = @fg_b, c = @fg_c;
  ELSE
    SELECT MAX(s.kind), MAX(s.n1), MAX(s.n2), MAX(s.n3) INTO tk, a, b, c FROM ${n.table} s WHERE s.k = bs;
    IF tk IS NULL OR tk <> '${kind.code}' THEN SET a = 0, b = 0, c = 0; END IF;
  END IF;
${kind.apply}  IF ok = 1 AND bu = 0 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'floodgate: the upsert and the apply fragment disagree';
  END IF;
  IF chg = 1 AND bm > 0 THEN
    SET bu = nw + bm * 1000;
    INSERT INTO ${n.table} (k, kind, n1, n2, n3, entries, expires_us) VALUES (CONCAT(bs, ':b'), 'b', bu, 0, 0, NULL, bu)
      ON DUPLICATE KEY UPDATE kind = 'b', n1 = bu, n2 = 0, n3 = 0, entries = NULL, expires_us = bu;
  END IF;
  ${SWEEP(n)}  SELECT CONCAT(bu, ',', nw, ',0,', ok, ',', rem, ',', rst, ',', rty) AS r;
END;
END`;
