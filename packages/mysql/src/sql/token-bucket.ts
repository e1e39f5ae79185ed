import { ceilMs, counterUpsert, settleByDifference, type SqlKind } from "./expr.ts";

/** Most µs a bucket's arrival time runs ahead of now (the TypeScript's MAX_BUCKET_US). */
const MAX_BUCKET_US = 2_251_799_813_685_248;

/** A µs time rounded up to the next whole minute. */
const wholeMinute = (us: string): string => `((${us}) DIV 60000000 + 1) * 60000000`;

const REFUND = `IF a > nw AND (mk IS NULL OR a = mk) THEN SET a = GREATEST(nw, a - cost * pr); END IF;
SET nx = a;
`;

/**
 * Token bucket (GCRA), as algorithms/token-bucket.ts: `a` is the theoretical arrival time of the
 * next request (µs), pr the µs per token. The mark is that time after the charge.
 */
export const TOKEN_BUCKET_SQL: SqlKind = {
  code: "t",
  apply: `BEGIN
DECLARE tat, nxt, tau BIGINT;
SET tau = L * pr, tat = GREATEST(a, nw);
SET nxt = tat + cost * pr, nx = nxt;
IF cost <= L AND nxt - nw <= tau THEN
  SET ok = 1, rty = 0;
ELSE
  SET ok = 0, rty = IF(cost > L, -1, ${ceilMs("nxt - tau - nw")});
END IF;
IF ok = 1 AND chg = 1 THEN
  SET a = nxt, rem = (tau - (nxt - nw)) DIV pr, rst = ${ceilMs("nxt")};
ELSE
  -- Negative only after the clock stepped back past the stored arrival time.
  SET rem = GREATEST(0, tau - (tat - nw)) DIV pr, rst = ${ceilMs("tat")};
END IF;
END;
`,
  // The arrival time after the charge (@fg_n1), the row's other numbers kept. The row's expiry,
  // when the bucket is full again, is rounded up to the next whole minute: a bucket charged again
  // and again rewrites its entry of the expiry index once a minute, not at every charge.
  upsert: counterUpsert({
    pre: [
      "@fg_a := IF(kind = 't', n1, 0)",
      "@fg_b := IF(kind = 't', n2, 0)",
      "@fg_c := IF(kind = 't', n3, 0)",
      "@fg_n1 := GREATEST(@fg_a, nw) + cost * pr",
      "@fg_ok := cost <= L AND @fg_n1 - nw <= L * pr",
      "@fg_n2 := @fg_b",
      "@fg_n3 := @fg_c",
      `@fg_nx := ${wholeMinute("@fg_n1")}`,
    ],
    insert: ["nw + cost * pr", "0", "0", wholeMinute("nw + cost * pr")],
    admitted: ["(L * pr - (@fg_n1 - nw)) DIV pr", ceilMs("@fg_n1"), "@fg_n1"],
  }),
  refund: REFUND,
  settle: settleByDifference(
    REFUND,
    `BEGIN
DECLARE nxt BIGINT DEFAULT LEAST(a + cost * pr, nw + ${MAX_BUCKET_US});
IF nxt > nw AND nxt > a THEN SET a = nxt; END IF;
SET nx = a;
END;
`,
  ),
};
