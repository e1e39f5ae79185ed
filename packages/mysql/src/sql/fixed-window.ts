import { ceilMs, counterUpsert, settleByDifference, type SqlKind } from "./expr.ts";

/**
 * Whether the stored window `a` is the current one (a window older than the stored one counts as
 * the stored one): the refund's and the overcharge's condition.
 */
const CURRENT = "a = GREATEST(nw DIV (pr * 1000), a)";

/**
 * Fixed window, as algorithms/fixed-window.ts: `a` the window index, `b` its count, pr the window
 * in ms. The mark is the window index charged.
 */
export const FIXED_WINDOW_SQL: SqlKind = {
  code: "f",
  apply: `BEGIN
DECLARE sz, ix, cnt, en BIGINT;
SET sz = pr * 1000;
SET ix = GREATEST(nw DIV sz, a);
SET cnt = IF(a = ix, b, 0), en = (ix + 1) * sz;
SET rst = ${ceilMs("en")}, nx = en;
IF cnt + cost <= L THEN
  SET ok = 1, rty = 0;
ELSE
  SET ok = 0, rty = IF(cost > L, -1, ${ceilMs("en - nw")});
END IF;
IF ok = 1 AND chg = 1 THEN
  SET a = ix, b = cnt + cost, rem = L - cnt - cost;
ELSE
  -- Above the limit only when a lowered limit reads state charged under a larger one.
  SET rem = GREATEST(0, L - cnt);
END IF;
END;
`,
  // The window charged (@fg_n1) and its count after the charge (@fg_n2).
  upsert: counterUpsert({
    pre: [
      "@fg_a := IF(kind = 'f', n1, 0)",
      "@fg_b := IF(kind = 'f', n2, 0)",
      "@fg_c := 0",
      "@fg_n1 := GREATEST(nw DIV (pr * 1000), @fg_a)",
      "@fg_n2 := IF(@fg_a = @fg_n1, @fg_b, 0) + cost",
      "@fg_ok := @fg_n2 <= L",
      "@fg_n3 := 0",
      "@fg_nx := (@fg_n1 + 1) * pr * 1000",
    ],
    insert: ["nw DIV (pr * 1000)", "cost", "0", "(nw DIV (pr * 1000) + 1) * pr * 1000"],
    admitted: ["L - @fg_n2", ceilMs("@fg_nx"), "@fg_n1"],
  }),
  refund: `IF ${CURRENT} AND (mk IS NULL OR a = mk) THEN SET b = GREATEST(0, b - cost); END IF;
SET nx = (a + 1) * pr * 1000;
`,
  settle: settleByDifference(
    `IF ${CURRENT} AND a = mk THEN SET b = GREATEST(0, b - cost); END IF;
SET nx = (a + 1) * pr * 1000;
`,
    // Past the limit, up to twice it (what reservations outstanding can give back).
    `IF ${CURRENT} AND a = mk THEN SET b = LEAST(b + cost, 2 * L, 8589934591); END IF;
SET nx = (a + 1) * pr * 1000;
`,
  ),
};
