import { SERVER_NOW, type SqlKind, type UpsertKind } from "./expr.ts";
import type { Names } from "./kernel.ts";

/*
 * One policy consumed as one upsert: the kind's decision made by the expressions of an
 * `INSERT ... ON DUPLICATE KEY UPDATE` (a statement of its own in the session's autocommit, so
 * one transaction that locks the row, reads its latest state and writes it). On a denial every
 * column keeps its value: nothing is charged, nothing is written. The state it read and its
 * decision come back in user variables (`@fg_...`): the procedure then runs the kind's apply
 * fragment on that state, pure arithmetic, for the figures and the mark (and checks that it
 * decides as the upsert did). A new key is inserted with its first charge; the VALUES clause,
 * evaluated before the duplicate check, clears `@fg_ok`, which stays NULL when the row was
 * inserted. Two callers on a new key queue on the key's lock: the second updates what the first
 * inserted.
 *
 * The key's block row is read before, without a lock, in its own statement (MySQL refuses a
 * subquery on the table an INSERT writes). A block in force, or a cost above the limit, skips the
 * upsert: the row is read without a lock and decided without a charge.
 */

/**
 * The upsert of kind `code`: state and decision in the first assignment, then the columns. The
 * variables are assigned as the arguments of one CONCAT_WS, which evaluates them in order and
 * cannot be folded away (an `(@v := x) IS NULL` of a NOT NULL `x` is folded to false unevaluated).
 */
const upsertStatement = (n: Names, code: string, u: UpsertKind): string =>
  `INSERT INTO ${n.table} (k, kind, n1, n2, n3, entries, expires_us)
  VALUES (bs, IF((@fg_ok := NULL) IS NULL, '${code}', '${code}'), ${u.insert.slice(0, 3).join(", ")}, NULL, ${u.insert[3]})
  ON DUPLICATE KEY UPDATE
    kind = IF(LENGTH(CONCAT_WS(',', ${u.pre.map((p) => `(${p})`).join(", ")})) > 0 AND @fg_ok, '${code}', kind),
    n1 = IF(@fg_ok, @fg_n1, n1), n2 = IF(@fg_ok, @fg_n2, n2), n3 = IF(@fg_ok, @fg_n3, n3),
    entries = IF(@fg_ok, NULL, entries), expires_us = IF(@fg_ok, @fg_nx, expires_us);
`;

/** The body of `consume_<code>` for a kind with an upsert: same arguments and answer as the transactional one. */
export const upsertBody = (n: Names, kind: SqlKind & { upsert: UpsertKind }): string =>
  `BEGIN
DECLARE nw BIGINT DEFAULT COALESCE(tm, ${SERVER_NOW});
DECLARE ok INT DEFAULT 0;
DECLARE chg INT DEFAULT 1;
DECLARE a, b, c, rem, rst, rty, nx, mk, bu BIGINT DEFAULT 0;
DECLARE lg LONGBLOB;
DECLARE tk CHAR(1) DEFAULT '';
SELECT COALESCE(MAX(z.n1), 0) INTO bu FROM ${n.table} z WHERE z.k = CONCAT(bs, ':b') AND z.kind = 'b' AND z.expires_us > nw;
IF bu = 0 AND cost <= L THEN
  ${upsertStatement(n, kind.code, kind.upsert)}  IF @fg_ok IS NOT NULL THEN SET a = @fg_a, b = @fg_b, c = @fg_c; END IF;
${kind.apply}  IF ok <> COALESCE(@fg_ok, 1) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'floodgate: the upsert and the apply fragment disagree';
  END IF;
ELSE
  SET chg = IF(bu > 0, 0, 1);
  SELECT MAX(s.kind), MAX(s.n1), MAX(s.n2), MAX(s.n3) INTO tk, a, b, c FROM ${n.table} s WHERE s.k = bs;
  IF tk IS NULL OR tk <> '${kind.code}' THEN SET a = 0, b = 0, c = 0; END IF;
${kind.apply}END IF;
SET mk = a;
IF ok = 0 AND chg = 1 AND bm > 0 THEN
  SET bu = nw + bm * 1000;
  INSERT INTO ${n.table} (k, kind, n1, n2, n3, entries, expires_us) VALUES (CONCAT(bs, ':b'), 'b', bu, 0, 0, NULL, bu)
    ON DUPLICATE KEY UPDATE kind = 'b', n1 = bu, n2 = 0, n3 = 0, entries = NULL, expires_us = bu;
END IF;
IF sw > 0 THEN
  BEGIN
    DECLARE CONTINUE HANDLER FOR SQLEXCEPTION BEGIN END;
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    DELETE FROM ${n.table} WHERE expires_us < nw LIMIT sw;
  END;
END IF;
SELECT CONCAT(bu, ',', nw, ',', IF(bu > 0, 0, ok), ',', ok, ',', rem, ',', rst, ',', rty, IF(ok = 1 AND bu = 0, CONCAT(',', mk), '')) AS r;
END`;
