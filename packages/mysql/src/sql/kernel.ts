import { CONCURRENCY_SQL } from "./concurrency.ts";
import { entries, entry, type SqlKind } from "./expr.ts";
import { FIXED_WINDOW_SQL } from "./fixed-window.ts";
import { SLIDING_LOG_SQL } from "./sliding-log.ts";
import { SLIDING_WINDOW_SQL } from "./sliding-window.ts";
import { TOKEN_BUCKET_SQL } from "./token-bucket.ts";

/*
 * The procedures every operation is built of: load one policy's row (locking it), write it back,
 * and the three operations of the kinds (apply, refund, settle), each dispatching on the kind
 * letter to the kind's fragment (one file per kind in this folder).
 *
 * A policy's row: `k` its key (`prefix{identifier}`, then `:1`, `:2`... for further policies),
 * `kind` its kind letter, `n1`..`n3` its numbers, `entries` its log, `expires_us` when it stops
 * mattering. A row holding another kind's state (a limiter reconfigured under the same prefix)
 * reads as no state. An expired row is read as it is, as the memory store reads state it has not
 * evicted yet: the algorithms decide on it exactly as on no state while time moves forward, and
 * as the memory store does when the clock steps back; the sweep deletes it.
 */

/** Every kind, by its letter: the kernel's dispatch, in one place. */
export const SQL_KINDS: readonly SqlKind[] = [TOKEN_BUCKET_SQL, FIXED_WINDOW_SQL, SLIDING_WINDOW_SQL, SLIDING_LOG_SQL, CONCURRENCY_SQL];

/** Names of the objects of one table: the table itself and its procedures (`<table>_v1_<name>`). */
export interface Names {
  /** The table, quoted. */
  readonly table: string;
  /** A procedure's name, quoted, as created (qualified by the database when one is named). */
  create(name: string): string;
  /** A procedure's name as called from another procedure (same database). */
  local(name: string): string;
}

const dispatch = (part: keyof Omit<SqlKind, "code">): string =>
  `CASE kd
${
    SQL_KINDS.map((k) => `WHEN '${k.code}' THEN\n${k[part]}`).join("")
  }ELSE SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'floodgate: unknown policy kind';
END CASE;
`;

/** The state variables every kernel procedure passes on. */
const STATE = "INOUT a BIGINT, INOUT b BIGINT, INOUT c BIGINT, INOUT lg LONGBLOB";

/**
 * Reads one policy's row `kk` into a..lg, `lk` the lock mode (see the load procedure). Pasted
 * into the decision loops rather than called: a nested CALL costs the server more than the
 * statements it runs.
 */
export const loadBlock = (n: Names, lk: string, block = false): string => {
  // With `block`, the first policy's read also reads when the key's block ends into `bu` (0:
  // none), one statement for both; when that row is missing and not created, a read of its own.
  const bu = block
    ? `, IF(p = 0, COALESCE((SELECT z.n1 FROM ${n.table} z WHERE z.k = CONCAT(bs, ':b') AND z.kind = 'b' AND z.expires_us > nw), 0), bu)`
    : "";
  const into = `INTO tk, a, b, c, lg, ex${block ? ", bu" : ""} FROM ${n.table} s WHERE s.k = kk`;
  const columns = `SELECT s.kind, s.n1, s.n2, s.n3, s.entries, s.expires_us${bu}`;
  return `BEGIN
DECLARE tk CHAR(1);
DECLARE ex BIGINT;
DECLARE CONTINUE HANDLER FOR NOT FOUND SET fd = 0;
SET fd = 1;
IF ${lk} = 0 THEN
  ${columns} ${into};
ELSE
  ${columns} ${into} FOR UPDATE;
  IF fd = 0 AND ${lk} = 1 THEN
    INSERT INTO ${n.table} (k, kind, n1, n2, n3, entries, expires_us) VALUES (kk, '', 0, 0, 0, NULL, 0)
      ON DUPLICATE KEY UPDATE expires_us = expires_us;
    SET fd = 1;
    ${columns} ${into} FOR UPDATE;
  END IF;
END IF;
${
    block
      ? `IF fd = 0 AND p = 0 THEN
  SELECT z.n1 INTO bu FROM ${n.table} z WHERE z.k = CONCAT(bs, ':b') AND z.kind = 'b' AND z.expires_us > nw;
END IF;
`
      : ""
  }IF fd = 0 OR tk <> kd THEN SET fd = 0, a = 0, b = 0, c = 0, lg = NULL; END IF;
END;
`;
};

/** Decides (with `chg` = 1, charges) `cost` for one policy: sets ok, rem, rst, rty, nx and the mark mk. */
export const APPLY: string =
  /* @__PURE__ */ (() =>
    `${dispatch("apply")}SET mk = IF(kd IN ('l', 'c'), IF(${entries("lg")} > 0, ${entry("lg", `${entries("lg")} - 1`)}, 0), a);
`)();

/** Writes one policy's row back. */
export const saveStatement = (n: Names): string =>
  `UPDATE ${n.table} SET kind = kd, n1 = a, n2 = b, n3 = c, entries = lg, expires_us = nx WHERE k = kk;\n`;

/** `CREATE PROCEDURE` statements of the kernel. */
export function kernelProcedures(n: Names): string[] {
  return [
    // lk: 0 reads without a lock; 1 locks the row, creating an empty one first when there is
    // none (an upsert takes the exclusive lock at once: two callers on a new key queue, they do
    // not deadlock); 2 locks it only when it exists. fd: whether it holds live state of kind kd.
    `CREATE PROCEDURE ${n.create("load")}(IN kk VARBINARY(3072), IN kd CHAR(1), IN nw BIGINT, IN lk TINYINT, OUT fd TINYINT, ${STATE})
    READS SQL DATA
${loadBlock(n, "lk")}`,
    `CREATE PROCEDURE ${
      n.create("save")
    }(IN kk VARBINARY(3072), IN kd CHAR(1), IN a BIGINT, IN b BIGINT, IN c BIGINT, IN lg LONGBLOB, IN nx BIGINT)
    MODIFIES SQL DATA
UPDATE ${n.table} SET kind = kd, n1 = a, n2 = b, n3 = c, entries = lg, expires_us = nx WHERE k = kk`,
    // Decides `cost` for one policy and, when it fits and chg = 1, charges it; mk: the charge's mark.
    `CREATE PROCEDURE ${n.create("apply")}(IN kd CHAR(1), IN L BIGINT, IN pr BIGINT, IN nw BIGINT, IN cost BIGINT, IN chg TINYINT, ${STATE},
  OUT ok TINYINT, OUT rem BIGINT, OUT rst BIGINT, OUT rty BIGINT, OUT nx BIGINT, OUT mk BIGINT)
    NO SQL
BEGIN
${APPLY}END`,
    `CREATE PROCEDURE ${
      n.create("refund_one")
    }(IN kd CHAR(1), IN L BIGINT, IN pr BIGINT, IN nw BIGINT, IN cost BIGINT, IN mk BIGINT, ${STATE}, OUT nx BIGINT)
    NO SQL
BEGIN
${dispatch("refund")}END`,
    `CREATE PROCEDURE ${
      n.create("settle_one")
    }(IN kd CHAR(1), IN L BIGINT, IN pr BIGINT, IN nw BIGINT, IN est BIGINT, IN act BIGINT, IN mk BIGINT, ${STATE}, OUT nx BIGINT)
    NO SQL
BEGIN
DECLARE cost BIGINT;
${dispatch("settle")}END`,
  ];
}
