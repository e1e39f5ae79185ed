import { chargeOf, type CounterKind } from "./counter.ts";

/*
 * One counter policy's charge as one statement the store sends itself, no function around it: a
 * PL/pgSQL call costs the server more than the upsert it runs (a function that only returns an
 * array took a third of a `SELECT 1`'s throughput away in pgbench). The same upsert as the charge
 * functions' (sql/counter.ts), with the same expressions, but its ON CONFLICT branch updates the
 * row whether or not the policy admits, so that a denial returns a row too:
 *
 * - Admitted: the plain columns charged, `blocked_until_us` NULL; it returns the figures
 *   [1, 1, remaining, resetAt, 0, mark], as the charge functions do.
 * - Denied, or a block in force: every number written back as it was (the same doubles: a denial
 *   charges nothing), `blocked_until_us` 0 (no block) or the block's end kept. It returns
 *   [-1, now, num1, num2, num3, blocked_until_us]: the row as it was decided on, from which the
 *   store computes the denial's figures with the reference algorithms (evaluateState), so they
 *   are the memory store's to the bit, a sliding window's retry time included.
 * - No row (the store then calls the kind's charge function, which decides as ever): a new key
 *   whose first cost is above the limit, and a row of other kinds or of the array layout (once:
 *   the function rewrites it in this kind's plain columns).
 *
 * A set with `block` options is charged by the function instead (its denial starts the block).
 *
 * Parameters: $1 key (at most 1,024 bytes), $2 limit, $3 parameter (µs per token, or the window
 * in ms), $4 cost (> 0), $5 now (µs; NULL: the database's clock, the statement's start, read
 * before it may wait for the row's lock as the charge functions read theirs). ON CONFLICT locks
 * the row and evaluates the update on its latest committed version, so concurrent charges on one
 * key run one after the other at READ COMMITTED, none lost.
 */

/** Now (µs): the caller's, or the statement's start on the database's clock (stable within the statement). */
const NOW = "coalesce($5::float8, floor(date_part('epoch', statement_timestamp()) * 1000000))";

/** The charge expressions' names (counter.ts) bound to the statement's parameters and clock. */
const bind = (expression: string): string =>
  expression.replace(
    /\b(lim|par|cost|nw)\b/g,
    (name) => name === "lim" ? "$2::float8" : name === "par" ? "$3::float8" : name === "cost" ? "$4::float8" : NOW,
  );

/** The statement for one kind (`@S`, `@T`: schema and table, as in the migration). */
export function directCharge(kind: CounterKind): string {
  const c = chargeOf(kind);
  const admits = `(s.blocked_until_us IS NULL OR s.blocked_until_us <= ${NOW}) AND ${bind(c.admits)}`;
  const set = c.set.map(([column, value]) => `${column} = CASE WHEN ${admits} THEN ${bind(value)} ELSE s.${column} END`);
  return `INSERT INTO @S.@T AS s (key, set_kinds, ${c.columns})
SELECT $1::text, '${kind}', ${bind(c.fresh)} WHERE ${bind(c.freshAdmits)}
ON CONFLICT (key) DO UPDATE SET ${set.join(", ")},
  blocked_until_us = CASE WHEN ${admits} THEN NULL WHEN s.blocked_until_us > ${NOW} THEN s.blocked_until_us ELSE 0 END
WHERE s.set_kinds = '${kind}' AND s.nums IS NULL
RETURNING CASE WHEN s.blocked_until_us IS NULL THEN ARRAY[1, 1, ${bind(c.remaining)}, ${bind(c.reset)}, 0, ${c.mark}]::float8[]
  ELSE ARRAY[-1, ${NOW}, s.num1, coalesce(s.num2, 0), coalesce(s.num3, 0), s.blocked_until_us]::float8[] END`;
}
