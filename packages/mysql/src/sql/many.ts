import { applyAll, BEGIN_WRITE, DECLARE, forEachPolicy } from "./common.ts";
import { nth } from "./expr.ts";
import type { Names } from "./kernel.ts";
import { writeBlock } from "./procedures.ts";

/*
 * The compound step (RateLimitStore.consumeMany): several (policy set, key) pairs decided in one
 * CALL, one transaction, all charged or none. The consume procedure's fragments, pair after pair.
 *
 * The pairs come sorted by their base keys (the store sorts them), and each pair's rows are
 * locked in policy order as it is decided: every compound call takes its locks in one order, so
 * two naming the same keys in opposite orders wait for each other instead of deadlocking.
 *
 * First every pair is decided, locking its rows, charging nothing (a blocked pair denies). A
 * denial refuses the whole step: the denying pair's key is blocked for the longest `block` of its
 * denying policies, as a denied consume of that pair would be, and nothing is charged anywhere.
 * When every pair admits, each is charged (the rows already locked) and its marks answered.
 *
 * Arguments: `ks` every pair's base key end to end, `kl` their lengths in bytes (comma-separated),
 * `kss` each pair's kind letters (comma-separated), `numss` each pair's `nums` (as consume takes
 * them; `;`-separated), the cost, `tm` (µs, NULL: the server's clock). Answers one row `r`:
 * whether every pair was charged (1 or 0), then per pair, each after a `;`, the consume
 * procedure's answer "bu,now,allowed,figures[,marks]".
 */

/** Sets `bs`, `kinds` and `nums` for pair `j` (0-based), its key starting after byte `at`. */
const PAIR = `SET bs = SUBSTRING(ks, at + 1, ${nth("kl", "j + 1")}), at = at + ${nth("kl", "j + 1")};
SET kinds = SUBSTRING_INDEX(SUBSTRING_INDEX(kss, ',', j + 1), ',', -1);
SET nums = SUBSTRING_INDEX(SUBSTRING_INDEX(numss, ';', j + 1), ';', -1);
`;

export function consumeManyProcedure(n: Names): string {
  return `CREATE PROCEDURE ${
    n.create("consume_many")
  }(IN ks LONGBLOB, IN kl TEXT, IN kss TEXT, IN numss LONGTEXT, IN cost BIGINT, IN tm BIGINT)
    MODIFIES SQL DATA
BEGIN
${DECLARE}DECLARE bu, bm BIGINT DEFAULT 0;
DECLARE bs VARBINARY(3000);
DECLARE kinds VARCHAR(32);
DECLARE nums VARCHAR(2048);
DECLARE np, j, at, allok INT DEFAULT 0;
DECLARE answer LONGTEXT DEFAULT '';
${BEGIN_WRITE}SET np = CHAR_LENGTH(kss) - CHAR_LENGTH(REPLACE(kss, ',', '')) + 1, allok = IF(cost > 0, 1, 0);
WHILE j < np DO
${PAIR}SET bu = 0, bm = 0;
${applyAll(n, "0", "1", true)}IF al = 0 AND cost > 0 AND bu = 0 THEN
  ${
    forEachPolicy(
      `IF ${nth("nums", "3 * p + 3")} > bm AND ${nth("SUBSTRING(res, 2)", "4 * p + 1")} = 0 THEN SET bm = ${
        nth("nums", "3 * p + 3")
      }; END IF;\n`,
    )
  }  IF bm > 0 THEN
    SET bu = nw + bm * 1000;
    ${writeBlock(n)}  END IF;
END IF;
IF al = 0 OR bu > 0 THEN SET allok = 0; END IF;
SET answer = CONCAT(answer, ';', bu, ',', nw, ',', IF(bu > 0, 0, al), res);
SET j = j + 1;
END WHILE;
IF allok = 1 THEN
  SET answer = '', j = 0, at = 0;
  WHILE j < np DO
${PAIR}${applyAll(n, "1", "1")}SET answer = CONCAT(answer, ';0,', nw, ',1', res, mks);
  SET j = j + 1;
  END WHILE;
END IF;
COMMIT;
SELECT CONCAT(allok, answer) AS r;
END`;
}
