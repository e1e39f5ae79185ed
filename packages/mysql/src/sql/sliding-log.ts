import { ceilMs, enc, entries, entry, settleByDifference, type SqlKind } from "./expr.ts";
import { LOG_UPSERT } from "./log-upsert.ts";

/*
 * Sliding log, as algorithms/sliding-log.ts: `lg` holds one 8-byte µs timestamp per admitted
 * unit, oldest first (the TypeScript keeps a ring; the order of its entries is the same); pr is
 * the window in ms. The mark is the timestamp the charge wrote.
 */

/** The decision, for a cost of `cost` (the concurrency kind passes 1). */
export const logApply = (cost: string): string =>
  `BEGIN
DECLARE sz, at_, n, h BIGINT;
SET sz = pr * 1000, n = ${entries("lg")};
-- Entries only grow, so a later \`at_\` never lands before the newest one (clock steps back).
SET at_ = IF(n > 0, GREATEST(nw, ${entry("lg", "n - 1")}), nw), h = 0;
-- Drop the entries that have left the window ending at \`at_\`.
WHILE h < n AND ${entry("lg", "h")} <= at_ - sz DO SET h = h + 1; END WHILE;
IF h > 0 THEN SET lg = SUBSTRING(lg, 8 * h + 1), n = n - h; END IF;
SET nx = at_ + sz;
IF n + ${cost} <= L THEN
  SET ok = 1, rty = 0;
ELSE
  SET ok = 0, rty = IF(${cost} > L, -1, ${ceilMs(`${entry("lg", `n + ${cost} - L - 1`)} + sz - nw`)});
END IF;
IF ok = 1 AND chg = 1 THEN
  SET lg = CONCAT(COALESCE(lg, ''), REPEAT(${enc("at_")}, ${cost}));
  SET rem = L - n - ${cost}, rst = ${ceilMs("at_ + sz")};
ELSE
  SET rem = GREATEST(0, L - n), rst = IF(n > 0, ${ceilMs(`${entry("lg", "n - 1")} + sz`)}, ${ceilMs("nw")});
END IF;
END;
`;

/** The expiry of what is left: the newest entry's end of window, 0 for an empty log. */
const EXPIRY = `SET n = ${entries("lg")};
SET nx = IF(n > 0, ${entry("lg", "n - 1")} + pr * 1000, 0);
`;

/**
 * Removes up to `cost` entries equal to the mark, the newest of them first (they sit together:
 * the log is sorted). The concurrency kind's settle passes 1.
 */
export const removeEntries = (cost: string): string =>
  `BEGIN
DECLARE n, q, r BIGINT;
SET n = ${entries("lg")}, q = n - 1, r = 0;
WHILE q >= 0 AND ${entry("lg", "q")} > mk DO SET q = q - 1; END WHILE;
WHILE q - r >= 0 AND r < ${cost} AND ${entry("lg", "q - r")} = mk DO SET r = r + 1; END WHILE;
IF r > 0 THEN SET lg = CONCAT(LEFT(lg, 8 * (q - r + 1)), SUBSTRING(lg, 8 * (q + 1) + 1)); END IF;
${EXPIRY}END;
`;

/** A refund of `cost`: into the mark's entries, or the newest entries without one. */
export const logRefund = (cost: string): string =>
  `IF mk IS NOT NULL THEN
${removeEntries(cost)}ELSE BEGIN
DECLARE n BIGINT;
SET n = GREATEST(0, ${entries("lg")} - ${cost});
SET lg = LEFT(lg, 8 * n);
${EXPIRY}END; END IF;
`;

/**
 * An overcharge: `cost` more entries of the mark's timestamp beside its first one, while it is
 * still in the window and logged; never more than twice the limit in all.
 */
const OVERCHARGE = `BEGIN
DECLARE n, ad, k BIGINT;
SET n = ${entries("lg")};
SET ad = LEAST(cost, 2 * L - n), k = 0;
IF mk > nw - pr * 1000 AND ad > 0 THEN
  WHILE k < n AND ${entry("lg", "k")} < mk DO SET k = k + 1; END WHILE;
  IF k < n AND ${entry("lg", "k")} = mk THEN
    SET lg = CONCAT(LEFT(lg, 8 * (k + 1)), REPEAT(${enc("mk")}, ad), SUBSTRING(lg, 8 * (k + 1) + 1));
  END IF;
END IF;
${EXPIRY}END;
`;

export const SLIDING_LOG_SQL: SqlKind = {
  code: "l",
  apply: logApply("cost"),
  refund: logRefund("cost"),
  settle: settleByDifference(logRefund("cost"), OVERCHARGE),
  upsert: LOG_UPSERT,
};
