import { cdiv, counterUpsert, settleByDifference, type SqlKind } from "./expr.ts";

/** The budget of the window `@fg_n1` whose previous count is `@fg_n3`: the limit less the previous window's overlap (× pr). */
const BUDGET = "L * pr - @fg_n3 * (pr - (GREATEST(0, nw - @fg_n1 * pr * 1000) DIV 1000))";

/** Rewrites the charged window's count (`b`) or, one window later, the previous count (`c`). */
const intoMark = (current: string, previous: string): string =>
  `IF a = mk THEN SET b = ${current}; ELSEIF a = mk + 1 THEN SET c = ${previous}; END IF;
SET nx = (a + 2) * pr * 1000;
`;

const REFUND_INTO_MARK = intoMark("GREATEST(0, b - cost)", "GREATEST(0, c - cost)");

/**
 * Sliding-window counter, as algorithms/sliding-window.ts: `a` the window index, `b` its count,
 * `c` the previous window's, pr the window in ms; the previous window weighs in proportion to its
 * overlap, compared in integers. The mark is the window index charged.
 */
export const SLIDING_WINDOW_SQL: SqlKind = {
  code: "s",
  apply: `BEGIN
DECLARE ix, cur, prv, st, el, bud, e, at_ BIGINT;
SET ix = GREATEST(nw DIV (pr * 1000), a);
SET cur = IF(a = ix, b, 0), prv = IF(a = ix, c, IF(a = ix - 1, b, 0));
SET st = ix * pr;
SET el = GREATEST(0, nw - st * 1000) DIV 1000;
SET bud = L * pr - prv * (pr - el), nx = (st + 2 * pr) * 1000;
IF (cur + cost) * pr <= bud THEN
  SET ok = 1, rty = 0;
ELSEIF cost > L THEN
  SET ok = 0, rty = -1;
ELSE
  SET ok = 0;
  -- The earliest whole ms at which the cost fits, given the estimate's shape.
  IF cur + cost <= L THEN
    SET e = GREATEST(0, pr - ((L - cur - cost) * pr) DIV prv);
    WHILE prv * (pr - e) + (cur + cost) * pr > L * pr DO SET e = e + 1; END WHILE;
    SET at_ = st + e;
  ELSE
    SET e = GREATEST(0, pr - ((L - cost) * pr) DIV cur);
    WHILE cur * (pr - e) + cost * pr > L * pr DO SET e = e + 1; END WHILE;
    SET at_ = st + pr + e;
  END IF;
  SET rty = GREATEST(1, ${cdiv("at_ * 1000 - nw", "1000")});
END IF;
IF ok = 1 AND chg = 1 THEN
  SET a = ix, b = cur + cost, c = prv;
  SET rem = GREATEST(0, bud - (cur + cost) * pr) DIV pr, rst = st + 2 * pr;
ELSE
  SET rem = GREATEST(0, bud - cur * pr) DIV pr;
  SET rst = IF(cur > 0, st + 2 * pr, IF(prv > 0, st + pr, (nw + 999) DIV 1000));
END IF;
END;
`,
  // The window charged (@fg_n1), its count after the charge (@fg_n2), the previous one's (@fg_n3).
  upsert: counterUpsert({
    pre: [
      "@fg_a := IF(kind = 's', n1, 0)",
      "@fg_b := IF(kind = 's', n2, 0)",
      "@fg_c := IF(kind = 's', n3, 0)",
      "@fg_n1 := GREATEST(nw DIV (pr * 1000), @fg_a)",
      "@fg_n2 := IF(@fg_a = @fg_n1, @fg_b, 0) + cost",
      "@fg_n3 := IF(@fg_a = @fg_n1, @fg_c, IF(@fg_a = @fg_n1 - 1, @fg_b, 0))",
      `@fg_ok := @fg_n2 * pr <= ${BUDGET}`,
      "@fg_nx := (@fg_n1 + 2) * pr * 1000",
    ],
    insert: ["nw DIV (pr * 1000)", "cost", "0", "(nw DIV (pr * 1000) + 2) * pr * 1000"],
    admitted: [`GREATEST(0, ${BUDGET} - @fg_n2 * pr) DIV pr`, "(@fg_n1 + 2) * pr", "@fg_n1"],
  }),
  // Into the mark: the stored window's own count, or its previous count one window later;
  // without one, into the current state (the current count first).
  refund: `IF mk IS NOT NULL THEN
${REFUND_INTO_MARK}ELSE BEGIN
DECLARE ix, cur, prv, f BIGINT;
SET ix = GREATEST(nw DIV (pr * 1000), a);
SET cur = IF(a = ix, b, 0), prv = IF(a = ix, c, IF(a = ix - 1, b, 0));
SET f = LEAST(cur, cost);
SET a = ix, b = cur - f, c = GREATEST(0, prv - (cost - f)), nx = (ix + 2) * pr * 1000;
END; END IF;
`,
  settle: settleByDifference(REFUND_INTO_MARK, intoMark("LEAST(b + cost, 9007199254740991)", "LEAST(c + cost, 9007199254740991)")),
};
