-- Floodgate rate-limit store for MySQL 8 / MariaDB 10.6+, schema version 1.
-- Idempotent: creates the table when missing and (re)creates the procedures.
DELIMITER $$
CREATE TABLE IF NOT EXISTS `floodgate` (
  k VARBINARY(3072) NOT NULL COMMENT 'prefix{identifier}, then :1, :2... per policy, :b its block, :r:<id> a reservation, :l:<id> a lease',
  kind CHAR(1) CHARACTER SET ascii COLLATE ascii_bin NOT NULL COMMENT 'policy kind letter, or b, r, l',
  n1 BIGINT NOT NULL DEFAULT 0,
  n2 BIGINT NOT NULL DEFAULT 0,
  n3 BIGINT NOT NULL DEFAULT 0,
  entries LONGBLOB NULL COMMENT 'a sliding log: 8-byte big-endian µs timestamps, oldest first',
  expires_us BIGINT NOT NULL COMMENT 'epoch µs after which the row is no state: swept',
  PRIMARY KEY (k),
  KEY `floodgate_expires` (expires_us)
) ENGINE=InnoDB$$

DROP PROCEDURE IF EXISTS `floodgate_v1_load`$$

CREATE PROCEDURE `floodgate_v1_load`(IN kk VARBINARY(3072), IN kd CHAR(1), IN nw BIGINT, IN lk TINYINT, OUT fd TINYINT, INOUT a BIGINT, INOUT b BIGINT, INOUT c BIGINT, INOUT lg LONGBLOB)
    READS SQL DATA
BEGIN
DECLARE tk CHAR(1);
DECLARE ex BIGINT;
DECLARE CONTINUE HANDLER FOR NOT FOUND SET fd = 0;
SET fd = 1;
IF lk = 0 THEN
  SELECT s.kind, s.n1, s.n2, s.n3, s.entries, s.expires_us INTO tk, a, b, c, lg, ex FROM `floodgate` s WHERE s.k = kk;
ELSE
  SELECT s.kind, s.n1, s.n2, s.n3, s.entries, s.expires_us INTO tk, a, b, c, lg, ex FROM `floodgate` s WHERE s.k = kk FOR UPDATE;
  IF fd = 0 AND lk = 1 THEN
    INSERT INTO `floodgate` (k, kind, n1, n2, n3, entries, expires_us) VALUES (kk, '', 0, 0, 0, NULL, 0)
      ON DUPLICATE KEY UPDATE expires_us = expires_us;
    SET fd = 1;
    SELECT s.kind, s.n1, s.n2, s.n3, s.entries, s.expires_us INTO tk, a, b, c, lg, ex FROM `floodgate` s WHERE s.k = kk FOR UPDATE;
  END IF;
END IF;
IF fd = 0 OR tk <> kd THEN SET fd = 0, a = 0, b = 0, c = 0, lg = NULL; END IF;
END;
$$

DROP PROCEDURE IF EXISTS `floodgate_v1_save`$$

CREATE PROCEDURE `floodgate_v1_save`(IN kk VARBINARY(3072), IN kd CHAR(1), IN a BIGINT, IN b BIGINT, IN c BIGINT, IN lg LONGBLOB, IN nx BIGINT)
    MODIFIES SQL DATA
UPDATE `floodgate` SET kind = kd, n1 = a, n2 = b, n3 = c, entries = lg, expires_us = nx WHERE k = kk$$

DROP PROCEDURE IF EXISTS `floodgate_v1_apply`$$

CREATE PROCEDURE `floodgate_v1_apply`(IN kd CHAR(1), IN L BIGINT, IN pr BIGINT, IN nw BIGINT, IN cost BIGINT, IN chg TINYINT, INOUT a BIGINT, INOUT b BIGINT, INOUT c BIGINT, INOUT lg LONGBLOB,
  OUT ok TINYINT, OUT rem BIGINT, OUT rst BIGINT, OUT rty BIGINT, OUT nx BIGINT, OUT mk BIGINT)
    NO SQL
BEGIN
CASE kd
WHEN 't' THEN
BEGIN
DECLARE tat, nxt, tau BIGINT;
SET tau = L * pr, tat = GREATEST(a, nw);
SET nxt = tat + cost * pr, nx = nxt;
IF cost <= L AND nxt - nw <= tau THEN
  SET ok = 1, rty = 0;
ELSE
  SET ok = 0, rty = IF(cost > L, -1, ((nxt - tau - nw) + 999) DIV 1000);
END IF;
IF ok = 1 AND chg = 1 THEN
  SET a = nxt, rem = (tau - (nxt - nw)) DIV pr, rst = ((nxt) + 999) DIV 1000;
ELSE
  -- Negative only after the clock stepped back past the stored arrival time.
  SET rem = GREATEST(0, tau - (tat - nw)) DIV pr, rst = ((tat) + 999) DIV 1000;
END IF;
END;
WHEN 'f' THEN
BEGIN
DECLARE sz, ix, cnt, en BIGINT;
SET sz = pr * 1000;
SET ix = GREATEST(nw DIV sz, a);
SET cnt = IF(a = ix, b, 0), en = (ix + 1) * sz;
SET rst = ((en) + 999) DIV 1000, nx = en;
IF cnt + cost <= L THEN
  SET ok = 1, rty = 0;
ELSE
  SET ok = 0, rty = IF(cost > L, -1, ((en - nw) + 999) DIV 1000);
END IF;
IF ok = 1 AND chg = 1 THEN
  SET a = ix, b = cnt + cost, rem = L - cnt - cost;
ELSE
  -- Above the limit only when a lowered limit reads state charged under a larger one.
  SET rem = GREATEST(0, L - cnt);
END IF;
END;
WHEN 's' THEN
BEGIN
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
  SET rty = GREATEST(1, IF((at_ * 1000 - nw) >= 0, ((at_ * 1000 - nw) + 1000 - 1) DIV 1000, -((-(at_ * 1000 - nw)) DIV 1000)));
END IF;
IF ok = 1 AND chg = 1 THEN
  SET a = ix, b = cur + cost, c = prv;
  SET rem = GREATEST(0, bud - (cur + cost) * pr) DIV pr, rst = st + 2 * pr;
ELSE
  SET rem = GREATEST(0, bud - cur * pr) DIV pr;
  SET rst = IF(cur > 0, st + 2 * pr, IF(prv > 0, st + pr, (nw + 999) DIV 1000));
END IF;
END;
WHEN 'l' THEN
BEGIN
DECLARE sz, at_, n, h BIGINT;
SET sz = pr * 1000, n = (COALESCE(LENGTH(lg), 0) DIV 8);
-- Entries only grow, so a later `at_` never lands before the newest one (clock steps back).
SET at_ = IF(n > 0, GREATEST(nw, CAST(CONV(HEX(SUBSTRING(lg, 8 * (n - 1) + 1, 8)), 16, 10) AS SIGNED)), nw), h = 0;
-- Drop the entries that have left the window ending at `at_`.
WHILE h < n AND CAST(CONV(HEX(SUBSTRING(lg, 8 * (h) + 1, 8)), 16, 10) AS SIGNED) <= at_ - sz DO SET h = h + 1; END WHILE;
IF h > 0 THEN SET lg = SUBSTRING(lg, 8 * h + 1), n = n - h; END IF;
SET nx = at_ + sz;
IF n + cost <= L THEN
  SET ok = 1, rty = 0;
ELSE
  SET ok = 0, rty = IF(cost > L, -1, ((CAST(CONV(HEX(SUBSTRING(lg, 8 * (n + cost - L - 1) + 1, 8)), 16, 10) AS SIGNED) + sz - nw) + 999) DIV 1000);
END IF;
IF ok = 1 AND chg = 1 THEN
  SET lg = CONCAT(COALESCE(lg, ''), REPEAT(UNHEX(LPAD(HEX(at_), 16, '0')), cost));
  SET rem = L - n - cost, rst = ((at_ + sz) + 999) DIV 1000;
ELSE
  SET rem = GREATEST(0, L - n), rst = IF(n > 0, ((CAST(CONV(HEX(SUBSTRING(lg, 8 * (n - 1) + 1, 8)), 16, 10) AS SIGNED) + sz) + 999) DIV 1000, ((nw) + 999) DIV 1000);
END IF;
END;
WHEN 'c' THEN
BEGIN
DECLARE sz, at_, n, h BIGINT;
SET sz = pr * 1000, n = (COALESCE(LENGTH(lg), 0) DIV 8);
-- Entries only grow, so a later `at_` never lands before the newest one (clock steps back).
SET at_ = IF(n > 0, GREATEST(nw, CAST(CONV(HEX(SUBSTRING(lg, 8 * (n - 1) + 1, 8)), 16, 10) AS SIGNED)), nw), h = 0;
-- Drop the entries that have left the window ending at `at_`.
WHILE h < n AND CAST(CONV(HEX(SUBSTRING(lg, 8 * (h) + 1, 8)), 16, 10) AS SIGNED) <= at_ - sz DO SET h = h + 1; END WHILE;
IF h > 0 THEN SET lg = SUBSTRING(lg, 8 * h + 1), n = n - h; END IF;
SET nx = at_ + sz;
IF n + 1 <= L THEN
  SET ok = 1, rty = 0;
ELSE
  SET ok = 0, rty = IF(1 > L, -1, ((CAST(CONV(HEX(SUBSTRING(lg, 8 * (n + 1 - L - 1) + 1, 8)), 16, 10) AS SIGNED) + sz - nw) + 999) DIV 1000);
END IF;
IF ok = 1 AND chg = 1 THEN
  SET lg = CONCAT(COALESCE(lg, ''), REPEAT(UNHEX(LPAD(HEX(at_), 16, '0')), 1));
  SET rem = L - n - 1, rst = ((at_ + sz) + 999) DIV 1000;
ELSE
  SET rem = GREATEST(0, L - n), rst = IF(n > 0, ((CAST(CONV(HEX(SUBSTRING(lg, 8 * (n - 1) + 1, 8)), 16, 10) AS SIGNED) + sz) + 999) DIV 1000, ((nw) + 999) DIV 1000);
END IF;
END;
ELSE SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'floodgate: unknown policy kind';
END CASE;
SET mk = IF(kd IN ('l', 'c'), IF((COALESCE(LENGTH(lg), 0) DIV 8) > 0, CAST(CONV(HEX(SUBSTRING(lg, 8 * ((COALESCE(LENGTH(lg), 0) DIV 8) - 1) + 1, 8)), 16, 10) AS SIGNED), 0), a);
END$$

DROP PROCEDURE IF EXISTS `floodgate_v1_refund_one`$$

CREATE PROCEDURE `floodgate_v1_refund_one`(IN kd CHAR(1), IN L BIGINT, IN pr BIGINT, IN nw BIGINT, IN cost BIGINT, IN mk BIGINT, INOUT a BIGINT, INOUT b BIGINT, INOUT c BIGINT, INOUT lg LONGBLOB, OUT nx BIGINT)
    NO SQL
BEGIN
CASE kd
WHEN 't' THEN
IF a > nw AND (mk IS NULL OR a = mk) THEN SET a = GREATEST(nw, a - cost * pr); END IF;
SET nx = a;
WHEN 'f' THEN
IF a = GREATEST(nw DIV (pr * 1000), a) AND (mk IS NULL OR a = mk) THEN SET b = GREATEST(0, b - cost); END IF;
SET nx = (a + 1) * pr * 1000;
WHEN 's' THEN
IF mk IS NOT NULL THEN
IF a = mk THEN SET b = GREATEST(0, b - cost); ELSEIF a = mk + 1 THEN SET c = GREATEST(0, c - cost); END IF;
SET nx = (a + 2) * pr * 1000;
ELSE BEGIN
DECLARE ix, cur, prv, f BIGINT;
SET ix = GREATEST(nw DIV (pr * 1000), a);
SET cur = IF(a = ix, b, 0), prv = IF(a = ix, c, IF(a = ix - 1, b, 0));
SET f = LEAST(cur, cost);
SET a = ix, b = cur - f, c = GREATEST(0, prv - (cost - f)), nx = (ix + 2) * pr * 1000;
END; END IF;
WHEN 'l' THEN
IF mk IS NOT NULL THEN
BEGIN
DECLARE n, q, r BIGINT;
SET n = (COALESCE(LENGTH(lg), 0) DIV 8), q = n - 1, r = 0;
WHILE q >= 0 AND CAST(CONV(HEX(SUBSTRING(lg, 8 * (q) + 1, 8)), 16, 10) AS SIGNED) > mk DO SET q = q - 1; END WHILE;
WHILE q - r >= 0 AND r < cost AND CAST(CONV(HEX(SUBSTRING(lg, 8 * (q - r) + 1, 8)), 16, 10) AS SIGNED) = mk DO SET r = r + 1; END WHILE;
IF r > 0 THEN SET lg = CONCAT(LEFT(lg, 8 * (q - r + 1)), SUBSTRING(lg, 8 * (q + 1) + 1)); END IF;
SET n = (COALESCE(LENGTH(lg), 0) DIV 8);
SET nx = IF(n > 0, CAST(CONV(HEX(SUBSTRING(lg, 8 * (n - 1) + 1, 8)), 16, 10) AS SIGNED) + pr * 1000, 0);
END;
ELSE BEGIN
DECLARE n BIGINT;
SET n = GREATEST(0, (COALESCE(LENGTH(lg), 0) DIV 8) - cost);
SET lg = LEFT(lg, 8 * n);
SET n = (COALESCE(LENGTH(lg), 0) DIV 8);
SET nx = IF(n > 0, CAST(CONV(HEX(SUBSTRING(lg, 8 * (n - 1) + 1, 8)), 16, 10) AS SIGNED) + pr * 1000, 0);
END; END IF;
WHEN 'c' THEN
IF mk IS NOT NULL THEN
BEGIN
DECLARE n, q, r BIGINT;
SET n = (COALESCE(LENGTH(lg), 0) DIV 8), q = n - 1, r = 0;
WHILE q >= 0 AND CAST(CONV(HEX(SUBSTRING(lg, 8 * (q) + 1, 8)), 16, 10) AS SIGNED) > mk DO SET q = q - 1; END WHILE;
WHILE q - r >= 0 AND r < IF(mk IS NULL, cost, 1) AND CAST(CONV(HEX(SUBSTRING(lg, 8 * (q - r) + 1, 8)), 16, 10) AS SIGNED) = mk DO SET r = r + 1; END WHILE;
IF r > 0 THEN SET lg = CONCAT(LEFT(lg, 8 * (q - r + 1)), SUBSTRING(lg, 8 * (q + 1) + 1)); END IF;
SET n = (COALESCE(LENGTH(lg), 0) DIV 8);
SET nx = IF(n > 0, CAST(CONV(HEX(SUBSTRING(lg, 8 * (n - 1) + 1, 8)), 16, 10) AS SIGNED) + pr * 1000, 0);
END;
ELSE BEGIN
DECLARE n BIGINT;
SET n = GREATEST(0, (COALESCE(LENGTH(lg), 0) DIV 8) - IF(mk IS NULL, cost, 1));
SET lg = LEFT(lg, 8 * n);
SET n = (COALESCE(LENGTH(lg), 0) DIV 8);
SET nx = IF(n > 0, CAST(CONV(HEX(SUBSTRING(lg, 8 * (n - 1) + 1, 8)), 16, 10) AS SIGNED) + pr * 1000, 0);
END; END IF;
ELSE SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'floodgate: unknown policy kind';
END CASE;
END$$

DROP PROCEDURE IF EXISTS `floodgate_v1_settle_one`$$

CREATE PROCEDURE `floodgate_v1_settle_one`(IN kd CHAR(1), IN L BIGINT, IN pr BIGINT, IN nw BIGINT, IN est BIGINT, IN act BIGINT, IN mk BIGINT, INOUT a BIGINT, INOUT b BIGINT, INOUT c BIGINT, INOUT lg LONGBLOB, OUT nx BIGINT)
    NO SQL
BEGIN
DECLARE cost BIGINT;
CASE kd
WHEN 't' THEN
SET cost = ABS(est - act);
IF act > est THEN
BEGIN
DECLARE nxt BIGINT DEFAULT LEAST(a + cost * pr, nw + 2251799813685248);
IF nxt > nw AND nxt > a THEN SET a = nxt; END IF;
SET nx = a;
END;
ELSE
IF a > nw AND (mk IS NULL OR a = mk) THEN SET a = GREATEST(nw, a - cost * pr); END IF;
SET nx = a;
END IF;
WHEN 'f' THEN
SET cost = ABS(est - act);
IF act > est THEN
IF a = GREATEST(nw DIV (pr * 1000), a) AND a = mk THEN SET b = LEAST(b + cost, 2 * L, 8589934591); END IF;
SET nx = (a + 1) * pr * 1000;
ELSE
IF a = GREATEST(nw DIV (pr * 1000), a) AND a = mk THEN SET b = GREATEST(0, b - cost); END IF;
SET nx = (a + 1) * pr * 1000;
END IF;
WHEN 's' THEN
SET cost = ABS(est - act);
IF act > est THEN
IF a = mk THEN SET b = LEAST(b + cost, 9007199254740991); ELSEIF a = mk + 1 THEN SET c = LEAST(c + cost, 9007199254740991); END IF;
SET nx = (a + 2) * pr * 1000;
ELSE
IF a = mk THEN SET b = GREATEST(0, b - cost); ELSEIF a = mk + 1 THEN SET c = GREATEST(0, c - cost); END IF;
SET nx = (a + 2) * pr * 1000;
END IF;
WHEN 'l' THEN
SET cost = ABS(est - act);
IF act > est THEN
BEGIN
DECLARE n, ad, k BIGINT;
SET n = (COALESCE(LENGTH(lg), 0) DIV 8);
SET ad = LEAST(cost, 2 * L - n), k = 0;
IF mk > nw - pr * 1000 AND ad > 0 THEN
  WHILE k < n AND CAST(CONV(HEX(SUBSTRING(lg, 8 * (k) + 1, 8)), 16, 10) AS SIGNED) < mk DO SET k = k + 1; END WHILE;
  IF k < n AND CAST(CONV(HEX(SUBSTRING(lg, 8 * (k) + 1, 8)), 16, 10) AS SIGNED) = mk THEN
    SET lg = CONCAT(LEFT(lg, 8 * (k + 1)), REPEAT(UNHEX(LPAD(HEX(mk), 16, '0')), ad), SUBSTRING(lg, 8 * (k + 1) + 1));
  END IF;
END IF;
SET n = (COALESCE(LENGTH(lg), 0) DIV 8);
SET nx = IF(n > 0, CAST(CONV(HEX(SUBSTRING(lg, 8 * (n - 1) + 1, 8)), 16, 10) AS SIGNED) + pr * 1000, 0);
END;
ELSE
IF mk IS NOT NULL THEN
BEGIN
DECLARE n, q, r BIGINT;
SET n = (COALESCE(LENGTH(lg), 0) DIV 8), q = n - 1, r = 0;
WHILE q >= 0 AND CAST(CONV(HEX(SUBSTRING(lg, 8 * (q) + 1, 8)), 16, 10) AS SIGNED) > mk DO SET q = q - 1; END WHILE;
WHILE q - r >= 0 AND r < cost AND CAST(CONV(HEX(SUBSTRING(lg, 8 * (q - r) + 1, 8)), 16, 10) AS SIGNED) = mk DO SET r = r + 1; END WHILE;
IF r > 0 THEN SET lg = CONCAT(LEFT(lg, 8 * (q - r + 1)), SUBSTRING(lg, 8 * (q + 1) + 1)); END IF;
SET n = (COALESCE(LENGTH(lg), 0) DIV 8);
SET nx = IF(n > 0, CAST(CONV(HEX(SUBSTRING(lg, 8 * (n - 1) + 1, 8)), 16, 10) AS SIGNED) + pr * 1000, 0);
END;
ELSE BEGIN
DECLARE n BIGINT;
SET n = GREATEST(0, (COALESCE(LENGTH(lg), 0) DIV 8) - cost);
SET lg = LEFT(lg, 8 * n);
SET n = (COALESCE(LENGTH(lg), 0) DIV 8);
SET nx = IF(n > 0, CAST(CONV(HEX(SUBSTRING(lg, 8 * (n - 1) + 1, 8)), 16, 10) AS SIGNED) + pr * 1000, 0);
END; END IF;
END IF;
WHEN 'c' THEN
BEGIN
DECLARE n, q, r BIGINT;
SET n = (COALESCE(LENGTH(lg), 0) DIV 8), q = n - 1, r = 0;
WHILE q >= 0 AND CAST(CONV(HEX(SUBSTRING(lg, 8 * (q) + 1, 8)), 16, 10) AS SIGNED) > mk DO SET q = q - 1; END WHILE;
WHILE q - r >= 0 AND r < 1 AND CAST(CONV(HEX(SUBSTRING(lg, 8 * (q - r) + 1, 8)), 16, 10) AS SIGNED) = mk DO SET r = r + 1; END WHILE;
IF r > 0 THEN SET lg = CONCAT(LEFT(lg, 8 * (q - r + 1)), SUBSTRING(lg, 8 * (q + 1) + 1)); END IF;
SET n = (COALESCE(LENGTH(lg), 0) DIV 8);
SET nx = IF(n > 0, CAST(CONV(HEX(SUBSTRING(lg, 8 * (n - 1) + 1, 8)), 16, 10) AS SIGNED) + pr * 1000, 0);
END;
ELSE SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'floodgate: unknown policy kind';
END CASE;
END$$

DROP PROCEDURE IF EXISTS `floodgate_v1_sweep`$$

CREATE PROCEDURE `floodgate_v1_sweep`(IN nw BIGINT, IN lim INT)
    MODIFIES SQL DATA
BEGIN
DECLARE CONTINUE HANDLER FOR SQLEXCEPTION BEGIN END;
SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
DELETE FROM `floodgate` WHERE expires_us < nw LIMIT lim;
END$$

DROP PROCEDURE IF EXISTS `floodgate_v1_consume`$$

CREATE PROCEDURE `floodgate_v1_consume`(IN bs VARBINARY(3000), IN kinds VARCHAR(32), IN nums VARCHAR(2048), IN cost BIGINT, IN tm BIGINT, IN op TINYINT, IN rid VARBINARY(100), IN ttl BIGINT, IN sw INT)
    MODIFIES SQL DATA
BEGIN
DECLARE nw BIGINT DEFAULT COALESCE(tm, TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)));
DECLARE n, p, fd, ok, al, chg INT DEFAULT 0;
DECLARE L, pr, a, b, c, rem, rst, rty, nx, mk BIGINT;
DECLARE lg LONGBLOB;
DECLARE kd CHAR(1);
DECLARE kk VARBINARY(3072);
DECLARE res, mks TEXT DEFAULT '';
DECLARE bu, bm BIGINT DEFAULT 0;
DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
IF op = 0 THEN
  SET cost = 1;
ELSE
  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
END IF;
-- One policy: read (with the block), decide and charge in one pass; several: decide all, then charge all.
IF CHAR_LENGTH(kinds) = 1 AND op > 0 THEN
SET res = '', mks = '', al = 1;
SET n = CHAR_LENGTH(kinds), p = 0;
WHILE p < n DO
SET kd = SUBSTRING(kinds, p + 1, 1), L = CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(nums, ',', 3 * p + 1), ',', -1) AS SIGNED), pr = CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(nums, ',', 3 * p + 2), ',', -1) AS SIGNED);
SET kk = IF(p = 0, bs, CONCAT(bs, ':', p));
BEGIN
DECLARE tk CHAR(1);
DECLARE ex BIGINT;
DECLARE CONTINUE HANDLER FOR NOT FOUND SET fd = 0;
SET fd = 1;
IF 1 = 0 THEN
  SELECT s.kind, s.n1, s.n2, s.n3, s.entries, s.expires_us, IF(p = 0, COALESCE((SELECT z.n1 FROM `floodgate` z WHERE z.k = CONCAT(bs, ':b') AND z.kind = 'b' AND z.expires_us > nw), 0), bu) INTO tk, a, b, c, lg, ex, bu FROM `floodgate` s WHERE s.k = kk;
ELSE
  SELECT s.kind, s.n1, s.n2, s.n3, s.entries, s.expires_us, IF(p = 0, COALESCE((SELECT z.n1 FROM `floodgate` z WHERE z.k = CONCAT(bs, ':b') AND z.kind = 'b' AND z.expires_us > nw), 0), bu) INTO tk, a, b, c, lg, ex, bu FROM `floodgate` s WHERE s.k = kk FOR UPDATE;
  IF fd = 0 AND 1 = 1 THEN
    INSERT INTO `floodgate` (k, kind, n1, n2, n3, entries, expires_us) VALUES (kk, '', 0, 0, 0, NULL, 0)
      ON DUPLICATE KEY UPDATE expires_us = expires_us;
    SET fd = 1;
    SELECT s.kind, s.n1, s.n2, s.n3, s.entries, s.expires_us, IF(p = 0, COALESCE((SELECT z.n1 FROM `floodgate` z WHERE z.k = CONCAT(bs, ':b') AND z.kind = 'b' AND z.expires_us > nw), 0), bu) INTO tk, a, b, c, lg, ex, bu FROM `floodgate` s WHERE s.k = kk FOR UPDATE;
  END IF;
END IF;
IF fd = 0 AND p = 0 THEN
  SELECT z.n1 INTO bu FROM `floodgate` z WHERE z.k = CONCAT(bs, ':b') AND z.kind = 'b' AND z.expires_us > nw;
END IF;
IF fd = 0 OR tk <> kd THEN SET fd = 0, a = 0, b = 0, c = 0, lg = NULL; END IF;
END;
SET chg = IF(bu > 0, 0, 1);
CASE kd
WHEN 't' THEN
BEGIN
DECLARE tat, nxt, tau BIGINT;
SET tau = L * pr, tat = GREATEST(a, nw);
SET nxt = tat + cost * pr, nx = nxt;
IF cost <= L AND nxt - nw <= tau THEN
  SET ok = 1, rty = 0;
ELSE
  SET ok = 0, rty = IF(cost > L, -1, ((nxt - tau - nw) + 999) DIV 1000);
END IF;
IF ok = 1 AND chg = 1 THEN
  SET a = nxt, rem = (tau - (nxt - nw)) DIV pr, rst = ((nxt) + 999) DIV 1000;
ELSE
  -- Negative only after the clock stepped back past the stored arrival time.
  SET rem = GREATEST(0, tau - (tat - nw)) DIV pr, rst = ((tat) + 999) DIV 1000;
END IF;
END;
WHEN 'f' THEN
BEGIN
DECLARE sz, ix, cnt, en BIGINT;
SET sz = pr * 1000;
SET ix = GREATEST(nw DIV sz, a);
SET cnt = IF(a = ix, b, 0), en = (ix + 1) * sz;
SET rst = ((en) + 999) DIV 1000, nx = en;
IF cnt + cost <= L THEN
  SET ok = 1, rty = 0;
ELSE
  SET ok = 0, rty = IF(cost > L, -1, ((en - nw) + 999) DIV 1000);
END IF;
IF ok = 1 AND chg = 1 THEN
  SET a = ix, b = cnt + cost, rem = L - cnt - cost;
ELSE
  -- Above the limit only when a lowered limit reads state charged under a larger one.
  SET rem = GREATEST(0, L - cnt);
END IF;
END;
WHEN 's' THEN
BEGIN
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
  SET rty = GREATEST(1, IF((at_ * 1000 - nw) >= 0, ((at_ * 1000 - nw) + 1000 - 1) DIV 1000, -((-(at_ * 1000 - nw)) DIV 1000)));
END IF;
IF ok = 1 AND chg = 1 THEN
  SET a = ix, b = cur + cost, c = prv;
  SET rem = GREATEST(0, bud - (cur + cost) * pr) DIV pr, rst = st + 2 * pr;
ELSE
  SET rem = GREATEST(0, bud - cur * pr) DIV pr;
  SET rst = IF(cur > 0, st + 2 * pr, IF(prv > 0, st + pr, (nw + 999) DIV 1000));
END IF;
END;
WHEN 'l' THEN
BEGIN
DECLARE sz, at_, n, h BIGINT;
SET sz = pr * 1000, n = (COALESCE(LENGTH(lg), 0) DIV 8);
-- Entries only grow, so a later `at_` never lands before the newest one (clock steps back).
SET at_ = IF(n > 0, GREATEST(nw, CAST(CONV(HEX(SUBSTRING(lg, 8 * (n - 1) + 1, 8)), 16, 10) AS SIGNED)), nw), h = 0;
-- Drop the entries that have left the window ending at `at_`.
WHILE h < n AND CAST(CONV(HEX(SUBSTRING(lg, 8 * (h) + 1, 8)), 16, 10) AS SIGNED) <= at_ - sz DO SET h = h + 1; END WHILE;
IF h > 0 THEN SET lg = SUBSTRING(lg, 8 * h + 1), n = n - h; END IF;
SET nx = at_ + sz;
IF n + cost <= L THEN
  SET ok = 1, rty = 0;
ELSE
  SET ok = 0, rty = IF(cost > L, -1, ((CAST(CONV(HEX(SUBSTRING(lg, 8 * (n + cost - L - 1) + 1, 8)), 16, 10) AS SIGNED) + sz - nw) + 999) DIV 1000);
END IF;
IF ok = 1 AND chg = 1 THEN
  SET lg = CONCAT(COALESCE(lg, ''), REPEAT(UNHEX(LPAD(HEX(at_), 16, '0')), cost));
  SET rem = L - n - cost, rst = ((at_ + sz) + 999) DIV 1000;
ELSE
  SET rem = GREATEST(0, L - n), rst = IF(n > 0, ((CAST(CONV(HEX(SUBSTRING(lg, 8 * (n - 1) + 1, 8)), 16, 10) AS SIGNED) + sz) + 999) DIV 1000, ((nw) + 999) DIV 1000);
END IF;
END;
WHEN 'c' THEN
BEGIN
DECLARE sz, at_, n, h BIGINT;
SET sz = pr * 1000, n = (COALESCE(LENGTH(lg), 0) DIV 8);
-- Entries only grow, so a later `at_` never lands before the newest one (clock steps back).
SET at_ = IF(n > 0, GREATEST(nw, CAST(CONV(HEX(SUBSTRING(lg, 8 * (n - 1) + 1, 8)), 16, 10) AS SIGNED)), nw), h = 0;
-- Drop the entries that have left the window ending at `at_`.
WHILE h < n AND CAST(CONV(HEX(SUBSTRING(lg, 8 * (h) + 1, 8)), 16, 10) AS SIGNED) <= at_ - sz DO SET h = h + 1; END WHILE;
IF h > 0 THEN SET lg = SUBSTRING(lg, 8 * h + 1), n = n - h; END IF;
SET nx = at_ + sz;
IF n + 1 <= L THEN
  SET ok = 1, rty = 0;
ELSE
  SET ok = 0, rty = IF(1 > L, -1, ((CAST(CONV(HEX(SUBSTRING(lg, 8 * (n + 1 - L - 1) + 1, 8)), 16, 10) AS SIGNED) + sz - nw) + 999) DIV 1000);
END IF;
IF ok = 1 AND chg = 1 THEN
  SET lg = CONCAT(COALESCE(lg, ''), REPEAT(UNHEX(LPAD(HEX(at_), 16, '0')), 1));
  SET rem = L - n - 1, rst = ((at_ + sz) + 999) DIV 1000;
ELSE
  SET rem = GREATEST(0, L - n), rst = IF(n > 0, ((CAST(CONV(HEX(SUBSTRING(lg, 8 * (n - 1) + 1, 8)), 16, 10) AS SIGNED) + sz) + 999) DIV 1000, ((nw) + 999) DIV 1000);
END IF;
END;
ELSE SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'floodgate: unknown policy kind';
END CASE;
SET mk = IF(kd IN ('l', 'c'), IF((COALESCE(LENGTH(lg), 0) DIV 8) > 0, CAST(CONV(HEX(SUBSTRING(lg, 8 * ((COALESCE(LENGTH(lg), 0) DIV 8) - 1) + 1, 8)), 16, 10) AS SIGNED), 0), a);
IF ok = 0 THEN SET al = 0; END IF;
IF ok = 1 AND chg = 1 THEN UPDATE `floodgate` SET kind = kd, n1 = a, n2 = b, n3 = c, entries = lg, expires_us = nx WHERE k = kk;
SET mks = CONCAT(mks, ',', mk); END IF;
SET res = CONCAT(res, ',', ok, ',', rem, ',', rst, ',', rty);
SET p = p + 1;
END WHILE;
ELSE
SET res = '', mks = '', al = 1;
SET n = CHAR_LENGTH(kinds), p = 0;
WHILE p < n DO
SET kd = SUBSTRING(kinds, p + 1, 1), L = CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(nums, ',', 3 * p + 1), ',', -1) AS SIGNED), pr = CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(nums, ',', 3 * p + 2), ',', -1) AS SIGNED);
SET kk = IF(p = 0, bs, CONCAT(bs, ':', p));
BEGIN
DECLARE tk CHAR(1);
DECLARE ex BIGINT;
DECLARE CONTINUE HANDLER FOR NOT FOUND SET fd = 0;
SET fd = 1;
IF IF(op > 0, 1, 0) = 0 THEN
  SELECT s.kind, s.n1, s.n2, s.n3, s.entries, s.expires_us, IF(p = 0, COALESCE((SELECT z.n1 FROM `floodgate` z WHERE z.k = CONCAT(bs, ':b') AND z.kind = 'b' AND z.expires_us > nw), 0), bu) INTO tk, a, b, c, lg, ex, bu FROM `floodgate` s WHERE s.k = kk;
ELSE
  SELECT s.kind, s.n1, s.n2, s.n3, s.entries, s.expires_us, IF(p = 0, COALESCE((SELECT z.n1 FROM `floodgate` z WHERE z.k = CONCAT(bs, ':b') AND z.kind = 'b' AND z.expires_us > nw), 0), bu) INTO tk, a, b, c, lg, ex, bu FROM `floodgate` s WHERE s.k = kk FOR UPDATE;
  IF fd = 0 AND IF(op > 0, 1, 0) = 1 THEN
    INSERT INTO `floodgate` (k, kind, n1, n2, n3, entries, expires_us) VALUES (kk, '', 0, 0, 0, NULL, 0)
      ON DUPLICATE KEY UPDATE expires_us = expires_us;
    SET fd = 1;
    SELECT s.kind, s.n1, s.n2, s.n3, s.entries, s.expires_us, IF(p = 0, COALESCE((SELECT z.n1 FROM `floodgate` z WHERE z.k = CONCAT(bs, ':b') AND z.kind = 'b' AND z.expires_us > nw), 0), bu) INTO tk, a, b, c, lg, ex, bu FROM `floodgate` s WHERE s.k = kk FOR UPDATE;
  END IF;
END IF;
IF fd = 0 AND p = 0 THEN
  SELECT z.n1 INTO bu FROM `floodgate` z WHERE z.k = CONCAT(bs, ':b') AND z.kind = 'b' AND z.expires_us > nw;
END IF;
IF fd = 0 OR tk <> kd THEN SET fd = 0, a = 0, b = 0, c = 0, lg = NULL; END IF;
END;
SET chg = 0;
CASE kd
WHEN 't' THEN
BEGIN
DECLARE tat, nxt, tau BIGINT;
SET tau = L * pr, tat = GREATEST(a, nw);
SET nxt = tat + cost * pr, nx = nxt;
IF cost <= L AND nxt - nw <= tau THEN
  SET ok = 1, rty = 0;
ELSE
  SET ok = 0, rty = IF(cost > L, -1, ((nxt - tau - nw) + 999) DIV 1000);
END IF;
IF ok = 1 AND chg = 1 THEN
  SET a = nxt, rem = (tau - (nxt - nw)) DIV pr, rst = ((nxt) + 999) DIV 1000;
ELSE
  -- Negative only after the clock stepped back past the stored arrival time.
  SET rem = GREATEST(0, tau - (tat - nw)) DIV pr, rst = ((tat) + 999) DIV 1000;
END IF;
END;
WHEN 'f' THEN
BEGIN
DECLARE sz, ix, cnt, en BIGINT;
SET sz = pr * 1000;
SET ix = GREATEST(nw DIV sz, a);
SET cnt = IF(a = ix, b, 0), en = (ix + 1) * sz;
SET rst = ((en) + 999) DIV 1000, nx = en;
IF cnt + cost <= L THEN
  SET ok = 1, rty = 0;
ELSE
  SET ok = 0, rty = IF(cost > L, -1, ((en - nw) + 999) DIV 1000);
END IF;
IF ok = 1 AND chg = 1 THEN
  SET a = ix, b = cnt + cost, rem = L - cnt - cost;
ELSE
  -- Above the limit only when a lowered limit reads state charged under a larger one.
  SET rem = GREATEST(0, L - cnt);
END IF;
END;
WHEN 's' THEN
BEGIN
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
  SET rty = GREATEST(1, IF((at_ * 1000 - nw) >= 0, ((at_ * 1000 - nw) + 1000 - 1) DIV 1000, -((-(at_ * 1000 - nw)) DIV 1000)));
END IF;
IF ok = 1 AND chg = 1 THEN
  SET a = ix, b = cur + cost, c = prv;
  SET rem = GREATEST(0, bud - (cur + cost) * pr) DIV pr, rst = st + 2 * pr;
ELSE
  SET rem = GREATEST(0, bud - cur * pr) DIV pr;
  SET rst = IF(cur > 0, st + 2 * pr, IF(prv > 0, st + pr, (nw + 999) DIV 1000));
END IF;
END;
WHEN 'l' THEN
BEGIN
DECLARE sz, at_, n, h BIGINT;
SET sz = pr * 1000, n = (COALESCE(LENGTH(lg), 0) DIV 8);
-- Entries only grow, so a later `at_` never lands before the newest one (clock steps back).
SET at_ = IF(n > 0, GREATEST(nw, CAST(CONV(HEX(SUBSTRING(lg, 8 * (n - 1) + 1, 8)), 16, 10) AS SIGNED)), nw), h = 0;
-- Drop the entries that have left the window ending at `at_`.
WHILE h < n AND CAST(CONV(HEX(SUBSTRING(lg, 8 * (h) + 1, 8)), 16, 10) AS SIGNED) <= at_ - sz DO SET h = h + 1; END WHILE;
IF h > 0 THEN SET lg = SUBSTRING(lg, 8 * h + 1), n = n - h; END IF;
SET nx = at_ + sz;
IF n + cost <= L THEN
  SET ok = 1, rty = 0;
ELSE
  SET ok = 0, rty = IF(cost > L, -1, ((CAST(CONV(HEX(SUBSTRING(lg, 8 * (n + cost - L - 1) + 1, 8)), 16, 10) AS SIGNED) + sz - nw) + 999) DIV 1000);
END IF;
IF ok = 1 AND chg = 1 THEN
  SET lg = CONCAT(COALESCE(lg, ''), REPEAT(UNHEX(LPAD(HEX(at_), 16, '0')), cost));
  SET rem = L - n - cost, rst = ((at_ + sz) + 999) DIV 1000;
ELSE
  SET rem = GREATEST(0, L - n), rst = IF(n > 0, ((CAST(CONV(HEX(SUBSTRING(lg, 8 * (n - 1) + 1, 8)), 16, 10) AS SIGNED) + sz) + 999) DIV 1000, ((nw) + 999) DIV 1000);
END IF;
END;
WHEN 'c' THEN
BEGIN
DECLARE sz, at_, n, h BIGINT;
SET sz = pr * 1000, n = (COALESCE(LENGTH(lg), 0) DIV 8);
-- Entries only grow, so a later `at_` never lands before the newest one (clock steps back).
SET at_ = IF(n > 0, GREATEST(nw, CAST(CONV(HEX(SUBSTRING(lg, 8 * (n - 1) + 1, 8)), 16, 10) AS SIGNED)), nw), h = 0;
-- Drop the entries that have left the window ending at `at_`.
WHILE h < n AND CAST(CONV(HEX(SUBSTRING(lg, 8 * (h) + 1, 8)), 16, 10) AS SIGNED) <= at_ - sz DO SET h = h + 1; END WHILE;
IF h > 0 THEN SET lg = SUBSTRING(lg, 8 * h + 1), n = n - h; END IF;
SET nx = at_ + sz;
IF n + 1 <= L THEN
  SET ok = 1, rty = 0;
ELSE
  SET ok = 0, rty = IF(1 > L, -1, ((CAST(CONV(HEX(SUBSTRING(lg, 8 * (n + 1 - L - 1) + 1, 8)), 16, 10) AS SIGNED) + sz - nw) + 999) DIV 1000);
END IF;
IF ok = 1 AND chg = 1 THEN
  SET lg = CONCAT(COALESCE(lg, ''), REPEAT(UNHEX(LPAD(HEX(at_), 16, '0')), 1));
  SET rem = L - n - 1, rst = ((at_ + sz) + 999) DIV 1000;
ELSE
  SET rem = GREATEST(0, L - n), rst = IF(n > 0, ((CAST(CONV(HEX(SUBSTRING(lg, 8 * (n - 1) + 1, 8)), 16, 10) AS SIGNED) + sz) + 999) DIV 1000, ((nw) + 999) DIV 1000);
END IF;
END;
ELSE SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'floodgate: unknown policy kind';
END CASE;
SET mk = IF(kd IN ('l', 'c'), IF((COALESCE(LENGTH(lg), 0) DIV 8) > 0, CAST(CONV(HEX(SUBSTRING(lg, 8 * ((COALESCE(LENGTH(lg), 0) DIV 8) - 1) + 1, 8)), 16, 10) AS SIGNED), 0), a);
IF ok = 0 THEN SET al = 0; END IF;
SET res = CONCAT(res, ',', ok, ',', rem, ',', rst, ',', rty);
SET p = p + 1;
END WHILE;
  IF al = 1 AND op > 0 AND bu = 0 THEN
SET res = '', mks = '', al = 1;
SET n = CHAR_LENGTH(kinds), p = 0;
WHILE p < n DO
SET kd = SUBSTRING(kinds, p + 1, 1), L = CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(nums, ',', 3 * p + 1), ',', -1) AS SIGNED), pr = CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(nums, ',', 3 * p + 2), ',', -1) AS SIGNED);
SET kk = IF(p = 0, bs, CONCAT(bs, ':', p));
BEGIN
DECLARE tk CHAR(1);
DECLARE ex BIGINT;
DECLARE CONTINUE HANDLER FOR NOT FOUND SET fd = 0;
SET fd = 1;
IF 1 = 0 THEN
  SELECT s.kind, s.n1, s.n2, s.n3, s.entries, s.expires_us INTO tk, a, b, c, lg, ex FROM `floodgate` s WHERE s.k = kk;
ELSE
  SELECT s.kind, s.n1, s.n2, s.n3, s.entries, s.expires_us INTO tk, a, b, c, lg, ex FROM `floodgate` s WHERE s.k = kk FOR UPDATE;
  IF fd = 0 AND 1 = 1 THEN
    INSERT INTO `floodgate` (k, kind, n1, n2, n3, entries, expires_us) VALUES (kk, '', 0, 0, 0, NULL, 0)
      ON DUPLICATE KEY UPDATE expires_us = expires_us;
    SET fd = 1;
    SELECT s.kind, s.n1, s.n2, s.n3, s.entries, s.expires_us INTO tk, a, b, c, lg, ex FROM `floodgate` s WHERE s.k = kk FOR UPDATE;
  END IF;
END IF;
IF fd = 0 OR tk <> kd THEN SET fd = 0, a = 0, b = 0, c = 0, lg = NULL; END IF;
END;
SET chg = 1;
CASE kd
WHEN 't' THEN
BEGIN
DECLARE tat, nxt, tau BIGINT;
SET tau = L * pr, tat = GREATEST(a, nw);
SET nxt = tat + cost * pr, nx = nxt;
IF cost <= L AND nxt - nw <= tau THEN
  SET ok = 1, rty = 0;
ELSE
  SET ok = 0, rty = IF(cost > L, -1, ((nxt - tau - nw) + 999) DIV 1000);
END IF;
IF ok = 1 AND chg = 1 THEN
  SET a = nxt, rem = (tau - (nxt - nw)) DIV pr, rst = ((nxt) + 999) DIV 1000;
ELSE
  -- Negative only after the clock stepped back past the stored arrival time.
  SET rem = GREATEST(0, tau - (tat - nw)) DIV pr, rst = ((tat) + 999) DIV 1000;
END IF;
END;
WHEN 'f' THEN
BEGIN
DECLARE sz, ix, cnt, en BIGINT;
SET sz = pr * 1000;
SET ix = GREATEST(nw DIV sz, a);
SET cnt = IF(a = ix, b, 0), en = (ix + 1) * sz;
SET rst = ((en) + 999) DIV 1000, nx = en;
IF cnt + cost <= L THEN
  SET ok = 1, rty = 0;
ELSE
  SET ok = 0, rty = IF(cost > L, -1, ((en - nw) + 999) DIV 1000);
END IF;
IF ok = 1 AND chg = 1 THEN
  SET a = ix, b = cnt + cost, rem = L - cnt - cost;
ELSE
  -- Above the limit only when a lowered limit reads state charged under a larger one.
  SET rem = GREATEST(0, L - cnt);
END IF;
END;
WHEN 's' THEN
BEGIN
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
  SET rty = GREATEST(1, IF((at_ * 1000 - nw) >= 0, ((at_ * 1000 - nw) + 1000 - 1) DIV 1000, -((-(at_ * 1000 - nw)) DIV 1000)));
END IF;
IF ok = 1 AND chg = 1 THEN
  SET a = ix, b = cur + cost, c = prv;
  SET rem = GREATEST(0, bud - (cur + cost) * pr) DIV pr, rst = st + 2 * pr;
ELSE
  SET rem = GREATEST(0, bud - cur * pr) DIV pr;
  SET rst = IF(cur > 0, st + 2 * pr, IF(prv > 0, st + pr, (nw + 999) DIV 1000));
END IF;
END;
WHEN 'l' THEN
BEGIN
DECLARE sz, at_, n, h BIGINT;
SET sz = pr * 1000, n = (COALESCE(LENGTH(lg), 0) DIV 8);
-- Entries only grow, so a later `at_` never lands before the newest one (clock steps back).
SET at_ = IF(n > 0, GREATEST(nw, CAST(CONV(HEX(SUBSTRING(lg, 8 * (n - 1) + 1, 8)), 16, 10) AS SIGNED)), nw), h = 0;
-- Drop the entries that have left the window ending at `at_`.
WHILE h < n AND CAST(CONV(HEX(SUBSTRING(lg, 8 * (h) + 1, 8)), 16, 10) AS SIGNED) <= at_ - sz DO SET h = h + 1; END WHILE;
IF h > 0 THEN SET lg = SUBSTRING(lg, 8 * h + 1), n = n - h; END IF;
SET nx = at_ + sz;
IF n + cost <= L THEN
  SET ok = 1, rty = 0;
ELSE
  SET ok = 0, rty = IF(cost > L, -1, ((CAST(CONV(HEX(SUBSTRING(lg, 8 * (n + cost - L - 1) + 1, 8)), 16, 10) AS SIGNED) + sz - nw) + 999) DIV 1000);
END IF;
IF ok = 1 AND chg = 1 THEN
  SET lg = CONCAT(COALESCE(lg, ''), REPEAT(UNHEX(LPAD(HEX(at_), 16, '0')), cost));
  SET rem = L - n - cost, rst = ((at_ + sz) + 999) DIV 1000;
ELSE
  SET rem = GREATEST(0, L - n), rst = IF(n > 0, ((CAST(CONV(HEX(SUBSTRING(lg, 8 * (n - 1) + 1, 8)), 16, 10) AS SIGNED) + sz) + 999) DIV 1000, ((nw) + 999) DIV 1000);
END IF;
END;
WHEN 'c' THEN
BEGIN
DECLARE sz, at_, n, h BIGINT;
SET sz = pr * 1000, n = (COALESCE(LENGTH(lg), 0) DIV 8);
-- Entries only grow, so a later `at_` never lands before the newest one (clock steps back).
SET at_ = IF(n > 0, GREATEST(nw, CAST(CONV(HEX(SUBSTRING(lg, 8 * (n - 1) + 1, 8)), 16, 10) AS SIGNED)), nw), h = 0;
-- Drop the entries that have left the window ending at `at_`.
WHILE h < n AND CAST(CONV(HEX(SUBSTRING(lg, 8 * (h) + 1, 8)), 16, 10) AS SIGNED) <= at_ - sz DO SET h = h + 1; END WHILE;
IF h > 0 THEN SET lg = SUBSTRING(lg, 8 * h + 1), n = n - h; END IF;
SET nx = at_ + sz;
IF n + 1 <= L THEN
  SET ok = 1, rty = 0;
ELSE
  SET ok = 0, rty = IF(1 > L, -1, ((CAST(CONV(HEX(SUBSTRING(lg, 8 * (n + 1 - L - 1) + 1, 8)), 16, 10) AS SIGNED) + sz - nw) + 999) DIV 1000);
END IF;
IF ok = 1 AND chg = 1 THEN
  SET lg = CONCAT(COALESCE(lg, ''), REPEAT(UNHEX(LPAD(HEX(at_), 16, '0')), 1));
  SET rem = L - n - 1, rst = ((at_ + sz) + 999) DIV 1000;
ELSE
  SET rem = GREATEST(0, L - n), rst = IF(n > 0, ((CAST(CONV(HEX(SUBSTRING(lg, 8 * (n - 1) + 1, 8)), 16, 10) AS SIGNED) + sz) + 999) DIV 1000, ((nw) + 999) DIV 1000);
END IF;
END;
ELSE SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'floodgate: unknown policy kind';
END CASE;
SET mk = IF(kd IN ('l', 'c'), IF((COALESCE(LENGTH(lg), 0) DIV 8) > 0, CAST(CONV(HEX(SUBSTRING(lg, 8 * ((COALESCE(LENGTH(lg), 0) DIV 8) - 1) + 1, 8)), 16, 10) AS SIGNED), 0), a);
IF ok = 0 THEN SET al = 0; END IF;
IF ok = 1 AND chg = 1 THEN UPDATE `floodgate` SET kind = kd, n1 = a, n2 = b, n3 = c, entries = lg, expires_us = nx WHERE k = kk;
SET mks = CONCAT(mks, ',', mk); END IF;
SET res = CONCAT(res, ',', ok, ',', rem, ',', rst, ',', rty);
SET p = p + 1;
END WHILE;
  END IF;
END IF;
IF al = 0 AND op > 0 AND bu = 0 THEN
  SET n = CHAR_LENGTH(kinds), p = 0;
WHILE p < n DO
SET kd = SUBSTRING(kinds, p + 1, 1), L = CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(nums, ',', 3 * p + 1), ',', -1) AS SIGNED), pr = CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(nums, ',', 3 * p + 2), ',', -1) AS SIGNED);
SET kk = IF(p = 0, bs, CONCAT(bs, ':', p));
IF CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(nums, ',', 3 * p + 3), ',', -1) AS SIGNED) > bm AND CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(SUBSTRING(res, 2), ',', 4 * p + 1), ',', -1) AS SIGNED) = 0 THEN SET bm = CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(nums, ',', 3 * p + 3), ',', -1) AS SIGNED); END IF;
SET p = p + 1;
END WHILE;
  IF bm > 0 THEN
    SET bu = nw + bm * 1000;
    INSERT INTO `floodgate` (k, kind, n1, n2, n3, entries, expires_us) VALUES (CONCAT(bs, ':b'), 'b', bu, 0, 0, NULL, bu)
  ON DUPLICATE KEY UPDATE kind = 'b', n1 = bu, n2 = 0, n3 = 0, entries = NULL, expires_us = bu;
UPDATE `floodgate` SET entries = IF(kind = 'l', entries, NULL), n1 = IF(kind = 'l', 0, n1) WHERE k = bs AND ((kind IN ('t', 'f', 's') AND entries = '') OR (kind = 'l' AND n1 = 1));
  END IF;
ELSEIF al = 1 AND op = 2 AND bu = 0 THEN
  INSERT INTO `floodgate` (k, kind, n1, n2, n3, entries, expires_us)
    VALUES (CONCAT(bs, ':r:', rid), 'r', cost, 0, 0, SUBSTRING(mks, 2), nw + ttl * 1000);
END IF;
IF op > 0 THEN COMMIT; END IF;
IF sw > 0 THEN CALL `floodgate_v1_sweep`(nw - 60000000, sw); END IF;
SELECT CONCAT(bu, ',', nw, ',', IF(bu > 0, 0, al), res, IF(al = 1 AND op > 0 AND bu = 0, mks, '')) AS r;
END$$

DROP PROCEDURE IF EXISTS `floodgate_v1_refund`$$

CREATE PROCEDURE `floodgate_v1_refund`(IN bs VARBINARY(3000), IN kinds VARCHAR(32), IN nums VARCHAR(2048), IN cost BIGINT, IN tm BIGINT, IN mks_in TEXT)
    MODIFIES SQL DATA
BEGIN
DECLARE nw BIGINT DEFAULT COALESCE(tm, TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)));
DECLARE n, p, fd, ok, al, chg INT DEFAULT 0;
DECLARE L, pr, a, b, c, rem, rst, rty, nx, mk BIGINT;
DECLARE lg LONGBLOB;
DECLARE kd CHAR(1);
DECLARE kk VARBINARY(3072);
DECLARE res, mks TEXT DEFAULT '';
DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
START TRANSACTION;
SET n = CHAR_LENGTH(kinds), p = 0;
WHILE p < n DO
SET kd = SUBSTRING(kinds, p + 1, 1), L = CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(nums, ',', 3 * p + 1), ',', -1) AS SIGNED), pr = CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(nums, ',', 3 * p + 2), ',', -1) AS SIGNED);
SET kk = IF(p = 0, bs, CONCAT(bs, ':', p));
CALL `floodgate_v1_load`(kk, kd, nw, 2, fd, a, b, c, lg);
IF fd = 1 THEN
  CALL `floodgate_v1_refund_one`(kd, L, pr, nw, cost, IF(mks_in IS NULL, NULL, CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(mks_in, ',', p + 1), ',', -1) AS SIGNED)), a, b, c, lg, nx);
  CALL `floodgate_v1_save`(kk, kd, a, b, c, lg, nx);
END IF;
SET p = p + 1;
END WHILE;
COMMIT;
END$$

DROP PROCEDURE IF EXISTS `floodgate_v1_settle`$$

CREATE PROCEDURE `floodgate_v1_settle`(IN bs VARBINARY(3000), IN kinds VARCHAR(32), IN nums VARCHAR(2048), IN rid VARBINARY(100), IN act BIGINT, IN tm BIGINT)
    MODIFIES SQL DATA
BEGIN
DECLARE nw BIGINT DEFAULT COALESCE(tm, TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)));
DECLARE n, p, fd, ok, al, chg INT DEFAULT 0;
DECLARE L, pr, a, b, c, rem, rst, rty, nx, mk BIGINT;
DECLARE lg LONGBLOB;
DECLARE kd CHAR(1);
DECLARE kk VARBINARY(3072);
DECLARE res, mks TEXT DEFAULT '';
DECLARE est, ex BIGINT;
DECLARE rec LONGBLOB;
DECLARE done INT DEFAULT 0;
DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
START TRANSACTION;
SET fd = 1;
BEGIN
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET fd = 0;
  SELECT s.n1, s.entries, s.expires_us INTO est, rec, ex FROM `floodgate` s WHERE s.k = CONCAT(bs, ':r:', rid) AND s.kind = 'r' FOR UPDATE;
END;
IF fd = 1 THEN
  DELETE FROM `floodgate` WHERE k = CONCAT(bs, ':r:', rid);
  IF ex > nw AND CHAR_LENGTH(rec) - CHAR_LENGTH(REPLACE(rec, ',', '')) + 1 = CHAR_LENGTH(kinds) THEN
    SET n = CHAR_LENGTH(kinds), p = 0;
WHILE p < n DO
SET kd = SUBSTRING(kinds, p + 1, 1), L = CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(nums, ',', 3 * p + 1), ',', -1) AS SIGNED), pr = CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(nums, ',', 3 * p + 2), ',', -1) AS SIGNED);
SET kk = IF(p = 0, bs, CONCAT(bs, ':', p));
CALL `floodgate_v1_load`(kk, kd, nw, 2, fd, a, b, c, lg);
IF fd = 1 THEN
  CALL `floodgate_v1_settle_one`(kd, L, pr, nw, est, act, CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(rec, ',', p + 1), ',', -1) AS SIGNED), a, b, c, lg, nx);
  CALL `floodgate_v1_save`(kk, kd, a, b, c, lg, nx);
END IF;
SET p = p + 1;
END WHILE;
    SET done = 1;
  END IF;
END IF;
COMMIT;
SELECT done AS r;
END$$

DROP PROCEDURE IF EXISTS `floodgate_v1_penalty`$$

CREATE PROCEDURE `floodgate_v1_penalty`(IN bs VARBINARY(3000), IN kinds VARCHAR(32), IN nums VARCHAR(2048), IN cost BIGINT, IN tm BIGINT)
    MODIFIES SQL DATA
BEGIN
DECLARE nw BIGINT DEFAULT COALESCE(tm, TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)));
DECLARE n, p, fd, ok, al, chg INT DEFAULT 0;
DECLARE L, pr, a, b, c, rem, rst, rty, nx, mk BIGINT;
DECLARE lg LONGBLOB;
DECLARE kd CHAR(1);
DECLARE kk VARBINARY(3072);
DECLARE res, mks TEXT DEFAULT '';
DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
START TRANSACTION;
SET n = CHAR_LENGTH(kinds), p = 0;
WHILE p < n DO
SET kd = SUBSTRING(kinds, p + 1, 1), L = CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(nums, ',', 3 * p + 1), ',', -1) AS SIGNED), pr = CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(nums, ',', 3 * p + 2), ',', -1) AS SIGNED);
SET kk = IF(p = 0, bs, CONCAT(bs, ':', p));
CALL `floodgate_v1_load`(kk, kd, nw, 1, fd, a, b, c, lg);
CALL `floodgate_v1_apply`(kd, L, pr, nw, 1, 0, a, b, c, lg, ok, rem, rst, rty, nx, mk);
IF rem > 0 THEN
  CALL `floodgate_v1_apply`(kd, L, pr, nw, LEAST(cost, rem), 1, a, b, c, lg, ok, rem, rst, rty, nx, mk);
  IF ok = 1 THEN CALL `floodgate_v1_save`(kk, kd, a, b, c, lg, nx); END IF;
END IF;
SET p = p + 1;
END WHILE;
COMMIT;
END$$

DROP PROCEDURE IF EXISTS `floodgate_v1_block`$$

CREATE PROCEDURE `floodgate_v1_block`(IN bs VARBINARY(3000), IN ms BIGINT, IN tm BIGINT)
    MODIFIES SQL DATA
BEGIN
DECLARE bu BIGINT DEFAULT COALESCE(tm, TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))) + ms * 1000;
INSERT INTO `floodgate` (k, kind, n1, n2, n3, entries, expires_us) VALUES (CONCAT(bs, ':b'), 'b', bu, 0, 0, NULL, bu)
  ON DUPLICATE KEY UPDATE kind = 'b', n1 = bu, n2 = 0, n3 = 0, entries = NULL, expires_us = bu;
UPDATE `floodgate` SET entries = IF(kind = 'l', entries, NULL), n1 = IF(kind = 'l', 0, n1) WHERE k = bs AND ((kind IN ('t', 'f', 's') AND entries = '') OR (kind = 'l' AND n1 = 1));
END$$

DROP PROCEDURE IF EXISTS `floodgate_v1_lease`$$

CREATE PROCEDURE `floodgate_v1_lease`(IN bs VARBINARY(3000), IN kinds VARCHAR(32), IN nums VARCHAR(2048), IN req BIGINT, IN want BIGINT, IN life BIGINT, IN minlife BIGINT,
  IN tm BIGINT, IN lid VARBINARY(100), IN rets TEXT, IN sw INT)
    MODIFIES SQL DATA
proc: BEGIN
DECLARE nw BIGINT DEFAULT COALESCE(tm, TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)));
DECLARE n, p, fd, ok, al, chg INT DEFAULT 0;
DECLARE L, pr, a, b, c, rem, rst, rty, nx, mk BIGINT;
DECLARE lg LONGBLOB;
DECLARE kd CHAR(1);
DECLARE kk VARBINARY(3072);
DECLARE res, mks TEXT DEFAULT '';
DECLARE g, wend, rest, cost, un, q, nr, en, bu BIGINT DEFAULT 0;
DECLARE figs TEXT;
DECLARE rec LONGBLOB;
DECLARE item TEXT;
DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
START TRANSACTION;
SET fd = 1;
BEGIN
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET fd = 0;
  SELECT s.entries, s.n1 INTO rec, en FROM `floodgate` s WHERE s.k = CONCAT(bs, ':l:', lid) AND s.kind = 'l' AND s.expires_us > nw FOR UPDATE;
END;
IF fd = 1 THEN
  COMMIT;
  SELECT CONCAT(rec, ',', GREATEST(0, en - nw), ',', nw) AS r;
  LEAVE proc;
END IF;
SET nr = IF(rets = '', 0, CHAR_LENGTH(rets) - CHAR_LENGTH(REPLACE(rets, ',', '')) + 1), q = 1;
WHILE q <= nr DO
  SET item = SUBSTRING_INDEX(SUBSTRING_INDEX(rets, ',', q), ',', -1), fd = 1;
  BEGIN
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET fd = 0;
    SELECT s.entries, s.n2 INTO rec, g FROM `floodgate` s
      WHERE s.k = CONCAT(bs, ':l:', SUBSTRING_INDEX(item, ':', 1)) AND s.kind = 'l' AND s.expires_us > nw FOR UPDATE;
  END;
  IF fd = 1 THEN
    DELETE FROM `floodgate` WHERE k = CONCAT(bs, ':l:', SUBSTRING_INDEX(item, ':', 1));
    SET cost = LEAST(CAST(SUBSTRING_INDEX(item, ':', -1) AS SIGNED), g);
    IF cost > 0 THEN
      SET n = CHAR_LENGTH(kinds), p = 0;
WHILE p < n DO
SET kd = SUBSTRING(kinds, p + 1, 1), L = CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(nums, ',', 3 * p + 1), ',', -1) AS SIGNED), pr = CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(nums, ',', 3 * p + 2), ',', -1) AS SIGNED);
SET kk = IF(p = 0, bs, CONCAT(bs, ':', p));
CALL `floodgate_v1_load`(kk, kd, nw, 2, fd, a, b, c, lg);
IF fd = 1 THEN
  CALL `floodgate_v1_refund_one`(kd, L, pr, nw, cost, CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(rec, ',', 4 * n + 2 + p), ',', -1) AS SIGNED), a, b, c, lg, nx);
  CALL `floodgate_v1_save`(kk, kd, a, b, c, lg, nx);
END IF;
SET p = p + 1;
END WHILE;
    END IF;
  END IF;
  SET q = q + 1;
END WHILE;
SET cost = IF(req > 0, req, 1), g = want, wend = nw + life;
SET res = '', mks = '', al = 1;
SET n = CHAR_LENGTH(kinds), p = 0;
WHILE p < n DO
SET kd = SUBSTRING(kinds, p + 1, 1), L = CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(nums, ',', 3 * p + 1), ',', -1) AS SIGNED), pr = CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(nums, ',', 3 * p + 2), ',', -1) AS SIGNED);
SET kk = IF(p = 0, bs, CONCAT(bs, ':', p));
BEGIN
DECLARE tk CHAR(1);
DECLARE ex BIGINT;
DECLARE CONTINUE HANDLER FOR NOT FOUND SET fd = 0;
SET fd = 1;
IF 1 = 0 THEN
  SELECT s.kind, s.n1, s.n2, s.n3, s.entries, s.expires_us INTO tk, a, b, c, lg, ex FROM `floodgate` s WHERE s.k = kk;
ELSE
  SELECT s.kind, s.n1, s.n2, s.n3, s.entries, s.expires_us INTO tk, a, b, c, lg, ex FROM `floodgate` s WHERE s.k = kk FOR UPDATE;
  IF fd = 0 AND 1 = 1 THEN
    INSERT INTO `floodgate` (k, kind, n1, n2, n3, entries, expires_us) VALUES (kk, '', 0, 0, 0, NULL, 0)
      ON DUPLICATE KEY UPDATE expires_us = expires_us;
    SET fd = 1;
    SELECT s.kind, s.n1, s.n2, s.n3, s.entries, s.expires_us INTO tk, a, b, c, lg, ex FROM `floodgate` s WHERE s.k = kk FOR UPDATE;
  END IF;
END IF;
IF fd = 0 OR tk <> kd THEN SET fd = 0, a = 0, b = 0, c = 0, lg = NULL; END IF;
END;
SET chg = 0;
CASE kd
WHEN 't' THEN
BEGIN
DECLARE tat, nxt, tau BIGINT;
SET tau = L * pr, tat = GREATEST(a, nw);
SET nxt = tat + cost * pr, nx = nxt;
IF cost <= L AND nxt - nw <= tau THEN
  SET ok = 1, rty = 0;
ELSE
  SET ok = 0, rty = IF(cost > L, -1, ((nxt - tau - nw) + 999) DIV 1000);
END IF;
IF ok = 1 AND chg = 1 THEN
  SET a = nxt, rem = (tau - (nxt - nw)) DIV pr, rst = ((nxt) + 999) DIV 1000;
ELSE
  -- Negative only after the clock stepped back past the stored arrival time.
  SET rem = GREATEST(0, tau - (tat - nw)) DIV pr, rst = ((tat) + 999) DIV 1000;
END IF;
END;
WHEN 'f' THEN
BEGIN
DECLARE sz, ix, cnt, en BIGINT;
SET sz = pr * 1000;
SET ix = GREATEST(nw DIV sz, a);
SET cnt = IF(a = ix, b, 0), en = (ix + 1) * sz;
SET rst = ((en) + 999) DIV 1000, nx = en;
IF cnt + cost <= L THEN
  SET ok = 1, rty = 0;
ELSE
  SET ok = 0, rty = IF(cost > L, -1, ((en - nw) + 999) DIV 1000);
END IF;
IF ok = 1 AND chg = 1 THEN
  SET a = ix, b = cnt + cost, rem = L - cnt - cost;
ELSE
  -- Above the limit only when a lowered limit reads state charged under a larger one.
  SET rem = GREATEST(0, L - cnt);
END IF;
END;
WHEN 's' THEN
BEGIN
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
  SET rty = GREATEST(1, IF((at_ * 1000 - nw) >= 0, ((at_ * 1000 - nw) + 1000 - 1) DIV 1000, -((-(at_ * 1000 - nw)) DIV 1000)));
END IF;
IF ok = 1 AND chg = 1 THEN
  SET a = ix, b = cur + cost, c = prv;
  SET rem = GREATEST(0, bud - (cur + cost) * pr) DIV pr, rst = st + 2 * pr;
ELSE
  SET rem = GREATEST(0, bud - cur * pr) DIV pr;
  SET rst = IF(cur > 0, st + 2 * pr, IF(prv > 0, st + pr, (nw + 999) DIV 1000));
END IF;
END;
WHEN 'l' THEN
BEGIN
DECLARE sz, at_, n, h BIGINT;
SET sz = pr * 1000, n = (COALESCE(LENGTH(lg), 0) DIV 8);
-- Entries only grow, so a later `at_` never lands before the newest one (clock steps back).
SET at_ = IF(n > 0, GREATEST(nw, CAST(CONV(HEX(SUBSTRING(lg, 8 * (n - 1) + 1, 8)), 16, 10) AS SIGNED)), nw), h = 0;
-- Drop the entries that have left the window ending at `at_`.
WHILE h < n AND CAST(CONV(HEX(SUBSTRING(lg, 8 * (h) + 1, 8)), 16, 10) AS SIGNED) <= at_ - sz DO SET h = h + 1; END WHILE;
IF h > 0 THEN SET lg = SUBSTRING(lg, 8 * h + 1), n = n - h; END IF;
SET nx = at_ + sz;
IF n + cost <= L THEN
  SET ok = 1, rty = 0;
ELSE
  SET ok = 0, rty = IF(cost > L, -1, ((CAST(CONV(HEX(SUBSTRING(lg, 8 * (n + cost - L - 1) + 1, 8)), 16, 10) AS SIGNED) + sz - nw) + 999) DIV 1000);
END IF;
IF ok = 1 AND chg = 1 THEN
  SET lg = CONCAT(COALESCE(lg, ''), REPEAT(UNHEX(LPAD(HEX(at_), 16, '0')), cost));
  SET rem = L - n - cost, rst = ((at_ + sz) + 999) DIV 1000;
ELSE
  SET rem = GREATEST(0, L - n), rst = IF(n > 0, ((CAST(CONV(HEX(SUBSTRING(lg, 8 * (n - 1) + 1, 8)), 16, 10) AS SIGNED) + sz) + 999) DIV 1000, ((nw) + 999) DIV 1000);
END IF;
END;
WHEN 'c' THEN
BEGIN
DECLARE sz, at_, n, h BIGINT;
SET sz = pr * 1000, n = (COALESCE(LENGTH(lg), 0) DIV 8);
-- Entries only grow, so a later `at_` never lands before the newest one (clock steps back).
SET at_ = IF(n > 0, GREATEST(nw, CAST(CONV(HEX(SUBSTRING(lg, 8 * (n - 1) + 1, 8)), 16, 10) AS SIGNED)), nw), h = 0;
-- Drop the entries that have left the window ending at `at_`.
WHILE h < n AND CAST(CONV(HEX(SUBSTRING(lg, 8 * (h) + 1, 8)), 16, 10) AS SIGNED) <= at_ - sz DO SET h = h + 1; END WHILE;
IF h > 0 THEN SET lg = SUBSTRING(lg, 8 * h + 1), n = n - h; END IF;
SET nx = at_ + sz;
IF n + 1 <= L THEN
  SET ok = 1, rty = 0;
ELSE
  SET ok = 0, rty = IF(1 > L, -1, ((CAST(CONV(HEX(SUBSTRING(lg, 8 * (n + 1 - L - 1) + 1, 8)), 16, 10) AS SIGNED) + sz - nw) + 999) DIV 1000);
END IF;
IF ok = 1 AND chg = 1 THEN
  SET lg = CONCAT(COALESCE(lg, ''), REPEAT(UNHEX(LPAD(HEX(at_), 16, '0')), 1));
  SET rem = L - n - 1, rst = ((at_ + sz) + 999) DIV 1000;
ELSE
  SET rem = GREATEST(0, L - n), rst = IF(n > 0, ((CAST(CONV(HEX(SUBSTRING(lg, 8 * (n - 1) + 1, 8)), 16, 10) AS SIGNED) + sz) + 999) DIV 1000, ((nw) + 999) DIV 1000);
END IF;
END;
ELSE SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'floodgate: unknown policy kind';
END CASE;
SET mk = IF(kd IN ('l', 'c'), IF((COALESCE(LENGTH(lg), 0) DIV 8) > 0, CAST(CONV(HEX(SUBSTRING(lg, 8 * ((COALESCE(LENGTH(lg), 0) DIV 8) - 1) + 1, 8)), 16, 10) AS SIGNED), 0), a);
IF ok = 0 THEN SET al = 0; END IF;
SET res = CONCAT(res, ',', ok, ',', rem, ',', rst, ',', rty);
SET p = p + 1;
END WHILE;
SELECT COALESCE((SELECT z.n1 FROM `floodgate` z WHERE z.k = CONCAT(bs, ':b') AND z.kind = 'b' AND z.expires_us > nw), 0) INTO bu;
IF bu > 0 THEN
  SET figs = '';
  SET n = CHAR_LENGTH(kinds), p = 0;
WHILE p < n DO
SET kd = SUBSTRING(kinds, p + 1, 1), L = CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(nums, ',', 3 * p + 1), ',', -1) AS SIGNED), pr = CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(nums, ',', 3 * p + 2), ',', -1) AS SIGNED);
SET kk = IF(p = 0, bs, CONCAT(bs, ':', p));
SET figs = CONCAT(figs, ',0,0,', GREATEST(CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(SUBSTRING(res, 2), ',', 4 * p + 3), ',', -1) AS SIGNED), ((bu) + 999) DIV 1000), ',', IF(CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(SUBSTRING(res, 2), ',', 4 * p + 4), ',', -1) AS SIGNED) = -1, -1, GREATEST(CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(SUBSTRING(res, 2), ',', 4 * p + 4), ',', -1) AS SIGNED), ((bu - nw) + 999) DIV 1000)));
SET p = p + 1;
END WHILE;
  SET res = figs, al = 0;
END IF;
SET n = CHAR_LENGTH(kinds), p = 0;
WHILE p < n DO
SET kd = SUBSTRING(kinds, p + 1, 1), L = CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(nums, ',', 3 * p + 1), ',', -1) AS SIGNED), pr = CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(nums, ',', 3 * p + 2), ',', -1) AS SIGNED);
SET kk = IF(p = 0, bs, CONCAT(bs, ':', p));
SET rest = CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(SUBSTRING(res, 2), ',', 4 * p + 2), ',', -1) AS SIGNED) - req;
IF rest < GREATEST((L + 99) DIV 100, 2 * cost) THEN SET g = 0; ELSE SET g = LEAST(g, rest DIV 2); END IF;
IF kd <> 't' THEN SET wend = LEAST(wend, (nw DIV (pr * 1000) + 1) * pr * 1000); END IF;
SET p = p + 1;
END WHILE;
SET ok = al;
IF al = 0 THEN
  SET g = 0;
ELSE
  -- What was wanted is for a whole lease life: a lease cut short by a window's end gets its share.
  IF wend - nw < life THEN SET g = LEAST(g, (want * (wend - nw)) DIV life); END IF;
  IF wend - nw < minlife THEN SET g = 0; END IF;
  IF g > 0 THEN
    SET cost = req + g;
    SET res = '', mks = '', al = 1;
SET n = CHAR_LENGTH(kinds), p = 0;
WHILE p < n DO
SET kd = SUBSTRING(kinds, p + 1, 1), L = CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(nums, ',', 3 * p + 1), ',', -1) AS SIGNED), pr = CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(nums, ',', 3 * p + 2), ',', -1) AS SIGNED);
SET kk = IF(p = 0, bs, CONCAT(bs, ':', p));
BEGIN
DECLARE tk CHAR(1);
DECLARE ex BIGINT;
DECLARE CONTINUE HANDLER FOR NOT FOUND SET fd = 0;
SET fd = 1;
IF 1 = 0 THEN
  SELECT s.kind, s.n1, s.n2, s.n3, s.entries, s.expires_us INTO tk, a, b, c, lg, ex FROM `floodgate` s WHERE s.k = kk;
ELSE
  SELECT s.kind, s.n1, s.n2, s.n3, s.entries, s.expires_us INTO tk, a, b, c, lg, ex FROM `floodgate` s WHERE s.k = kk FOR UPDATE;
  IF fd = 0 AND 1 = 1 THEN
    INSERT INTO `floodgate` (k, kind, n1, n2, n3, entries, expires_us) VALUES (kk, '', 0, 0, 0, NULL, 0)
      ON DUPLICATE KEY UPDATE expires_us = expires_us;
    SET fd = 1;
    SELECT s.kind, s.n1, s.n2, s.n3, s.entries, s.expires_us INTO tk, a, b, c, lg, ex FROM `floodgate` s WHERE s.k = kk FOR UPDATE;
  END IF;
END IF;
IF fd = 0 OR tk <> kd THEN SET fd = 0, a = 0, b = 0, c = 0, lg = NULL; END IF;
END;
SET chg = 0;
IF kd = 't' THEN
BEGIN
DECLARE tat, nxt, tau BIGINT;
SET tau = L * pr, tat = GREATEST(a, nw) + req * pr;
IF tat < wend THEN SET tat = wend; END IF;
SET nxt = tat + g * pr, nx = nxt;
IF cost <= L AND nxt - nw <= tau THEN SET ok = 1, rty = 0; ELSE SET ok = 0, rty = 0; END IF;
IF ok = 1 AND chg = 1 THEN
  SET a = nxt, rem = (tau - (nxt - nw)) DIV pr, rst = ((nxt) + 999) DIV 1000;
ELSE
  SET rem = GREATEST(0, tau - (tat - nw)) DIV pr, rst = ((tat) + 999) DIV 1000;
END IF;
END;
SET mk = a;
ELSE
CASE kd
WHEN 't' THEN
BEGIN
DECLARE tat, nxt, tau BIGINT;
SET tau = L * pr, tat = GREATEST(a, nw);
SET nxt = tat + cost * pr, nx = nxt;
IF cost <= L AND nxt - nw <= tau THEN
  SET ok = 1, rty = 0;
ELSE
  SET ok = 0, rty = IF(cost > L, -1, ((nxt - tau - nw) + 999) DIV 1000);
END IF;
IF ok = 1 AND chg = 1 THEN
  SET a = nxt, rem = (tau - (nxt - nw)) DIV pr, rst = ((nxt) + 999) DIV 1000;
ELSE
  -- Negative only after the clock stepped back past the stored arrival time.
  SET rem = GREATEST(0, tau - (tat - nw)) DIV pr, rst = ((tat) + 999) DIV 1000;
END IF;
END;
WHEN 'f' THEN
BEGIN
DECLARE sz, ix, cnt, en BIGINT;
SET sz = pr * 1000;
SET ix = GREATEST(nw DIV sz, a);
SET cnt = IF(a = ix, b, 0), en = (ix + 1) * sz;
SET rst = ((en) + 999) DIV 1000, nx = en;
IF cnt + cost <= L THEN
  SET ok = 1, rty = 0;
ELSE
  SET ok = 0, rty = IF(cost > L, -1, ((en - nw) + 999) DIV 1000);
END IF;
IF ok = 1 AND chg = 1 THEN
  SET a = ix, b = cnt + cost, rem = L - cnt - cost;
ELSE
  -- Above the limit only when a lowered limit reads state charged under a larger one.
  SET rem = GREATEST(0, L - cnt);
END IF;
END;
WHEN 's' THEN
BEGIN
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
  SET rty = GREATEST(1, IF((at_ * 1000 - nw) >= 0, ((at_ * 1000 - nw) + 1000 - 1) DIV 1000, -((-(at_ * 1000 - nw)) DIV 1000)));
END IF;
IF ok = 1 AND chg = 1 THEN
  SET a = ix, b = cur + cost, c = prv;
  SET rem = GREATEST(0, bud - (cur + cost) * pr) DIV pr, rst = st + 2 * pr;
ELSE
  SET rem = GREATEST(0, bud - cur * pr) DIV pr;
  SET rst = IF(cur > 0, st + 2 * pr, IF(prv > 0, st + pr, (nw + 999) DIV 1000));
END IF;
END;
WHEN 'l' THEN
BEGIN
DECLARE sz, at_, n, h BIGINT;
SET sz = pr * 1000, n = (COALESCE(LENGTH(lg), 0) DIV 8);
-- Entries only grow, so a later `at_` never lands before the newest one (clock steps back).
SET at_ = IF(n > 0, GREATEST(nw, CAST(CONV(HEX(SUBSTRING(lg, 8 * (n - 1) + 1, 8)), 16, 10) AS SIGNED)), nw), h = 0;
-- Drop the entries that have left the window ending at `at_`.
WHILE h < n AND CAST(CONV(HEX(SUBSTRING(lg, 8 * (h) + 1, 8)), 16, 10) AS SIGNED) <= at_ - sz DO SET h = h + 1; END WHILE;
IF h > 0 THEN SET lg = SUBSTRING(lg, 8 * h + 1), n = n - h; END IF;
SET nx = at_ + sz;
IF n + cost <= L THEN
  SET ok = 1, rty = 0;
ELSE
  SET ok = 0, rty = IF(cost > L, -1, ((CAST(CONV(HEX(SUBSTRING(lg, 8 * (n + cost - L - 1) + 1, 8)), 16, 10) AS SIGNED) + sz - nw) + 999) DIV 1000);
END IF;
IF ok = 1 AND chg = 1 THEN
  SET lg = CONCAT(COALESCE(lg, ''), REPEAT(UNHEX(LPAD(HEX(at_), 16, '0')), cost));
  SET rem = L - n - cost, rst = ((at_ + sz) + 999) DIV 1000;
ELSE
  SET rem = GREATEST(0, L - n), rst = IF(n > 0, ((CAST(CONV(HEX(SUBSTRING(lg, 8 * (n - 1) + 1, 8)), 16, 10) AS SIGNED) + sz) + 999) DIV 1000, ((nw) + 999) DIV 1000);
END IF;
END;
WHEN 'c' THEN
BEGIN
DECLARE sz, at_, n, h BIGINT;
SET sz = pr * 1000, n = (COALESCE(LENGTH(lg), 0) DIV 8);
-- Entries only grow, so a later `at_` never lands before the newest one (clock steps back).
SET at_ = IF(n > 0, GREATEST(nw, CAST(CONV(HEX(SUBSTRING(lg, 8 * (n - 1) + 1, 8)), 16, 10) AS SIGNED)), nw), h = 0;
-- Drop the entries that have left the window ending at `at_`.
WHILE h < n AND CAST(CONV(HEX(SUBSTRING(lg, 8 * (h) + 1, 8)), 16, 10) AS SIGNED) <= at_ - sz DO SET h = h + 1; END WHILE;
IF h > 0 THEN SET lg = SUBSTRING(lg, 8 * h + 1), n = n - h; END IF;
SET nx = at_ + sz;
IF n + 1 <= L THEN
  SET ok = 1, rty = 0;
ELSE
  SET ok = 0, rty = IF(1 > L, -1, ((CAST(CONV(HEX(SUBSTRING(lg, 8 * (n + 1 - L - 1) + 1, 8)), 16, 10) AS SIGNED) + sz - nw) + 999) DIV 1000);
END IF;
IF ok = 1 AND chg = 1 THEN
  SET lg = CONCAT(COALESCE(lg, ''), REPEAT(UNHEX(LPAD(HEX(at_), 16, '0')), 1));
  SET rem = L - n - 1, rst = ((at_ + sz) + 999) DIV 1000;
ELSE
  SET rem = GREATEST(0, L - n), rst = IF(n > 0, ((CAST(CONV(HEX(SUBSTRING(lg, 8 * (n - 1) + 1, 8)), 16, 10) AS SIGNED) + sz) + 999) DIV 1000, ((nw) + 999) DIV 1000);
END IF;
END;
ELSE SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'floodgate: unknown policy kind';
END CASE;
SET mk = IF(kd IN ('l', 'c'), IF((COALESCE(LENGTH(lg), 0) DIV 8) > 0, CAST(CONV(HEX(SUBSTRING(lg, 8 * ((COALESCE(LENGTH(lg), 0) DIV 8) - 1) + 1, 8)), 16, 10) AS SIGNED), 0), a);
END IF;
IF ok = 0 THEN SET al = 0; END IF;
SET res = CONCAT(res, ',', ok, ',', rem, ',', rst, ',', rty);
SET p = p + 1;
END WHILE;
    IF al = 1 THEN
      SET res = '', mks = '', al = 1;
SET n = CHAR_LENGTH(kinds), p = 0;
WHILE p < n DO
SET kd = SUBSTRING(kinds, p + 1, 1), L = CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(nums, ',', 3 * p + 1), ',', -1) AS SIGNED), pr = CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(nums, ',', 3 * p + 2), ',', -1) AS SIGNED);
SET kk = IF(p = 0, bs, CONCAT(bs, ':', p));
BEGIN
DECLARE tk CHAR(1);
DECLARE ex BIGINT;
DECLARE CONTINUE HANDLER FOR NOT FOUND SET fd = 0;
SET fd = 1;
IF 1 = 0 THEN
  SELECT s.kind, s.n1, s.n2, s.n3, s.entries, s.expires_us INTO tk, a, b, c, lg, ex FROM `floodgate` s WHERE s.k = kk;
ELSE
  SELECT s.kind, s.n1, s.n2, s.n3, s.entries, s.expires_us INTO tk, a, b, c, lg, ex FROM `floodgate` s WHERE s.k = kk FOR UPDATE;
  IF fd = 0 AND 1 = 1 THEN
    INSERT INTO `floodgate` (k, kind, n1, n2, n3, entries, expires_us) VALUES (kk, '', 0, 0, 0, NULL, 0)
      ON DUPLICATE KEY UPDATE expires_us = expires_us;
    SET fd = 1;
    SELECT s.kind, s.n1, s.n2, s.n3, s.entries, s.expires_us INTO tk, a, b, c, lg, ex FROM `floodgate` s WHERE s.k = kk FOR UPDATE;
  END IF;
END IF;
IF fd = 0 OR tk <> kd THEN SET fd = 0, a = 0, b = 0, c = 0, lg = NULL; END IF;
END;
SET chg = 1;
IF kd = 't' THEN
BEGIN
DECLARE tat, nxt, tau BIGINT;
SET tau = L * pr, tat = GREATEST(a, nw) + req * pr;
IF tat < wend THEN SET tat = wend; END IF;
SET nxt = tat + g * pr, nx = nxt;
IF cost <= L AND nxt - nw <= tau THEN SET ok = 1, rty = 0; ELSE SET ok = 0, rty = 0; END IF;
IF ok = 1 AND chg = 1 THEN
  SET a = nxt, rem = (tau - (nxt - nw)) DIV pr, rst = ((nxt) + 999) DIV 1000;
ELSE
  SET rem = GREATEST(0, tau - (tat - nw)) DIV pr, rst = ((tat) + 999) DIV 1000;
END IF;
END;
SET mk = a;
ELSE
CASE kd
WHEN 't' THEN
BEGIN
DECLARE tat, nxt, tau BIGINT;
SET tau = L * pr, tat = GREATEST(a, nw);
SET nxt = tat + cost * pr, nx = nxt;
IF cost <= L AND nxt - nw <= tau THEN
  SET ok = 1, rty = 0;
ELSE
  SET ok = 0, rty = IF(cost > L, -1, ((nxt - tau - nw) + 999) DIV 1000);
END IF;
IF ok = 1 AND chg = 1 THEN
  SET a = nxt, rem = (tau - (nxt - nw)) DIV pr, rst = ((nxt) + 999) DIV 1000;
ELSE
  -- Negative only after the clock stepped back past the stored arrival time.
  SET rem = GREATEST(0, tau - (tat - nw)) DIV pr, rst = ((tat) + 999) DIV 1000;
END IF;
END;
WHEN 'f' THEN
BEGIN
DECLARE sz, ix, cnt, en BIGINT;
SET sz = pr * 1000;
SET ix = GREATEST(nw DIV sz, a);
SET cnt = IF(a = ix, b, 0), en = (ix + 1) * sz;
SET rst = ((en) + 999) DIV 1000, nx = en;
IF cnt + cost <= L THEN
  SET ok = 1, rty = 0;
ELSE
  SET ok = 0, rty = IF(cost > L, -1, ((en - nw) + 999) DIV 1000);
END IF;
IF ok = 1 AND chg = 1 THEN
  SET a = ix, b = cnt + cost, rem = L - cnt - cost;
ELSE
  -- Above the limit only when a lowered limit reads state charged under a larger one.
  SET rem = GREATEST(0, L - cnt);
END IF;
END;
WHEN 's' THEN
BEGIN
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
  SET rty = GREATEST(1, IF((at_ * 1000 - nw) >= 0, ((at_ * 1000 - nw) + 1000 - 1) DIV 1000, -((-(at_ * 1000 - nw)) DIV 1000)));
END IF;
IF ok = 1 AND chg = 1 THEN
  SET a = ix, b = cur + cost, c = prv;
  SET rem = GREATEST(0, bud - (cur + cost) * pr) DIV pr, rst = st + 2 * pr;
ELSE
  SET rem = GREATEST(0, bud - cur * pr) DIV pr;
  SET rst = IF(cur > 0, st + 2 * pr, IF(prv > 0, st + pr, (nw + 999) DIV 1000));
END IF;
END;
WHEN 'l' THEN
BEGIN
DECLARE sz, at_, n, h BIGINT;
SET sz = pr * 1000, n = (COALESCE(LENGTH(lg), 0) DIV 8);
-- Entries only grow, so a later `at_` never lands before the newest one (clock steps back).
SET at_ = IF(n > 0, GREATEST(nw, CAST(CONV(HEX(SUBSTRING(lg, 8 * (n - 1) + 1, 8)), 16, 10) AS SIGNED)), nw), h = 0;
-- Drop the entries that have left the window ending at `at_`.
WHILE h < n AND CAST(CONV(HEX(SUBSTRING(lg, 8 * (h) + 1, 8)), 16, 10) AS SIGNED) <= at_ - sz DO SET h = h + 1; END WHILE;
IF h > 0 THEN SET lg = SUBSTRING(lg, 8 * h + 1), n = n - h; END IF;
SET nx = at_ + sz;
IF n + cost <= L THEN
  SET ok = 1, rty = 0;
ELSE
  SET ok = 0, rty = IF(cost > L, -1, ((CAST(CONV(HEX(SUBSTRING(lg, 8 * (n + cost - L - 1) + 1, 8)), 16, 10) AS SIGNED) + sz - nw) + 999) DIV 1000);
END IF;
IF ok = 1 AND chg = 1 THEN
  SET lg = CONCAT(COALESCE(lg, ''), REPEAT(UNHEX(LPAD(HEX(at_), 16, '0')), cost));
  SET rem = L - n - cost, rst = ((at_ + sz) + 999) DIV 1000;
ELSE
  SET rem = GREATEST(0, L - n), rst = IF(n > 0, ((CAST(CONV(HEX(SUBSTRING(lg, 8 * (n - 1) + 1, 8)), 16, 10) AS SIGNED) + sz) + 999) DIV 1000, ((nw) + 999) DIV 1000);
END IF;
END;
WHEN 'c' THEN
BEGIN
DECLARE sz, at_, n, h BIGINT;
SET sz = pr * 1000, n = (COALESCE(LENGTH(lg), 0) DIV 8);
-- Entries only grow, so a later `at_` never lands before the newest one (clock steps back).
SET at_ = IF(n > 0, GREATEST(nw, CAST(CONV(HEX(SUBSTRING(lg, 8 * (n - 1) + 1, 8)), 16, 10) AS SIGNED)), nw), h = 0;
-- Drop the entries that have left the window ending at `at_`.
WHILE h < n AND CAST(CONV(HEX(SUBSTRING(lg, 8 * (h) + 1, 8)), 16, 10) AS SIGNED) <= at_ - sz DO SET h = h + 1; END WHILE;
IF h > 0 THEN SET lg = SUBSTRING(lg, 8 * h + 1), n = n - h; END IF;
SET nx = at_ + sz;
IF n + 1 <= L THEN
  SET ok = 1, rty = 0;
ELSE
  SET ok = 0, rty = IF(1 > L, -1, ((CAST(CONV(HEX(SUBSTRING(lg, 8 * (n + 1 - L - 1) + 1, 8)), 16, 10) AS SIGNED) + sz - nw) + 999) DIV 1000);
END IF;
IF ok = 1 AND chg = 1 THEN
  SET lg = CONCAT(COALESCE(lg, ''), REPEAT(UNHEX(LPAD(HEX(at_), 16, '0')), 1));
  SET rem = L - n - 1, rst = ((at_ + sz) + 999) DIV 1000;
ELSE
  SET rem = GREATEST(0, L - n), rst = IF(n > 0, ((CAST(CONV(HEX(SUBSTRING(lg, 8 * (n - 1) + 1, 8)), 16, 10) AS SIGNED) + sz) + 999) DIV 1000, ((nw) + 999) DIV 1000);
END IF;
END;
ELSE SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'floodgate: unknown policy kind';
END CASE;
SET mk = IF(kd IN ('l', 'c'), IF((COALESCE(LENGTH(lg), 0) DIV 8) > 0, CAST(CONV(HEX(SUBSTRING(lg, 8 * ((COALESCE(LENGTH(lg), 0) DIV 8) - 1) + 1, 8)), 16, 10) AS SIGNED), 0), a);
END IF;
IF ok = 0 THEN SET al = 0; END IF;
IF ok = 1 AND chg = 1 THEN UPDATE `floodgate` SET kind = kd, n1 = a, n2 = b, n3 = c, entries = lg, expires_us = nx WHERE k = kk;
SET mks = CONCAT(mks, ',', mk); END IF;
SET res = CONCAT(res, ',', ok, ',', rem, ',', rst, ',', rty);
SET p = p + 1;
END WHILE;
    ELSE
      SET g = 0;
    END IF;
  END IF;
  IF g = 0 AND req > 0 THEN
    SET cost = req;
    SET res = '', mks = '', al = 1;
SET n = CHAR_LENGTH(kinds), p = 0;
WHILE p < n DO
SET kd = SUBSTRING(kinds, p + 1, 1), L = CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(nums, ',', 3 * p + 1), ',', -1) AS SIGNED), pr = CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(nums, ',', 3 * p + 2), ',', -1) AS SIGNED);
SET kk = IF(p = 0, bs, CONCAT(bs, ':', p));
BEGIN
DECLARE tk CHAR(1);
DECLARE ex BIGINT;
DECLARE CONTINUE HANDLER FOR NOT FOUND SET fd = 0;
SET fd = 1;
IF 1 = 0 THEN
  SELECT s.kind, s.n1, s.n2, s.n3, s.entries, s.expires_us INTO tk, a, b, c, lg, ex FROM `floodgate` s WHERE s.k = kk;
ELSE
  SELECT s.kind, s.n1, s.n2, s.n3, s.entries, s.expires_us INTO tk, a, b, c, lg, ex FROM `floodgate` s WHERE s.k = kk FOR UPDATE;
  IF fd = 0 AND 1 = 1 THEN
    INSERT INTO `floodgate` (k, kind, n1, n2, n3, entries, expires_us) VALUES (kk, '', 0, 0, 0, NULL, 0)
      ON DUPLICATE KEY UPDATE expires_us = expires_us;
    SET fd = 1;
    SELECT s.kind, s.n1, s.n2, s.n3, s.entries, s.expires_us INTO tk, a, b, c, lg, ex FROM `floodgate` s WHERE s.k = kk FOR UPDATE;
  END IF;
END IF;
IF fd = 0 OR tk <> kd THEN SET fd = 0, a = 0, b = 0, c = 0, lg = NULL; END IF;
END;
SET chg = 1;
CASE kd
WHEN 't' THEN
BEGIN
DECLARE tat, nxt, tau BIGINT;
SET tau = L * pr, tat = GREATEST(a, nw);
SET nxt = tat + cost * pr, nx = nxt;
IF cost <= L AND nxt - nw <= tau THEN
  SET ok = 1, rty = 0;
ELSE
  SET ok = 0, rty = IF(cost > L, -1, ((nxt - tau - nw) + 999) DIV 1000);
END IF;
IF ok = 1 AND chg = 1 THEN
  SET a = nxt, rem = (tau - (nxt - nw)) DIV pr, rst = ((nxt) + 999) DIV 1000;
ELSE
  -- Negative only after the clock stepped back past the stored arrival time.
  SET rem = GREATEST(0, tau - (tat - nw)) DIV pr, rst = ((tat) + 999) DIV 1000;
END IF;
END;
WHEN 'f' THEN
BEGIN
DECLARE sz, ix, cnt, en BIGINT;
SET sz = pr * 1000;
SET ix = GREATEST(nw DIV sz, a);
SET cnt = IF(a = ix, b, 0), en = (ix + 1) * sz;
SET rst = ((en) + 999) DIV 1000, nx = en;
IF cnt + cost <= L THEN
  SET ok = 1, rty = 0;
ELSE
  SET ok = 0, rty = IF(cost > L, -1, ((en - nw) + 999) DIV 1000);
END IF;
IF ok = 1 AND chg = 1 THEN
  SET a = ix, b = cnt + cost, rem = L - cnt - cost;
ELSE
  -- Above the limit only when a lowered limit reads state charged under a larger one.
  SET rem = GREATEST(0, L - cnt);
END IF;
END;
WHEN 's' THEN
BEGIN
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
  SET rty = GREATEST(1, IF((at_ * 1000 - nw) >= 0, ((at_ * 1000 - nw) + 1000 - 1) DIV 1000, -((-(at_ * 1000 - nw)) DIV 1000)));
END IF;
IF ok = 1 AND chg = 1 THEN
  SET a = ix, b = cur + cost, c = prv;
  SET rem = GREATEST(0, bud - (cur + cost) * pr) DIV pr, rst = st + 2 * pr;
ELSE
  SET rem = GREATEST(0, bud - cur * pr) DIV pr;
  SET rst = IF(cur > 0, st + 2 * pr, IF(prv > 0, st + pr, (nw + 999) DIV 1000));
END IF;
END;
WHEN 'l' THEN
BEGIN
DECLARE sz, at_, n, h BIGINT;
SET sz = pr * 1000, n = (COALESCE(LENGTH(lg), 0) DIV 8);
-- Entries only grow, so a later `at_` never lands before the newest one (clock steps back).
SET at_ = IF(n > 0, GREATEST(nw, CAST(CONV(HEX(SUBSTRING(lg, 8 * (n - 1) + 1, 8)), 16, 10) AS SIGNED)), nw), h = 0;
-- Drop the entries that have left the window ending at `at_`.
WHILE h < n AND CAST(CONV(HEX(SUBSTRING(lg, 8 * (h) + 1, 8)), 16, 10) AS SIGNED) <= at_ - sz DO SET h = h + 1; END WHILE;
IF h > 0 THEN SET lg = SUBSTRING(lg, 8 * h + 1), n = n - h; END IF;
SET nx = at_ + sz;
IF n + cost <= L THEN
  SET ok = 1, rty = 0;
ELSE
  SET ok = 0, rty = IF(cost > L, -1, ((CAST(CONV(HEX(SUBSTRING(lg, 8 * (n + cost - L - 1) + 1, 8)), 16, 10) AS SIGNED) + sz - nw) + 999) DIV 1000);
END IF;
IF ok = 1 AND chg = 1 THEN
  SET lg = CONCAT(COALESCE(lg, ''), REPEAT(UNHEX(LPAD(HEX(at_), 16, '0')), cost));
  SET rem = L - n - cost, rst = ((at_ + sz) + 999) DIV 1000;
ELSE
  SET rem = GREATEST(0, L - n), rst = IF(n > 0, ((CAST(CONV(HEX(SUBSTRING(lg, 8 * (n - 1) + 1, 8)), 16, 10) AS SIGNED) + sz) + 999) DIV 1000, ((nw) + 999) DIV 1000);
END IF;
END;
WHEN 'c' THEN
BEGIN
DECLARE sz, at_, n, h BIGINT;
SET sz = pr * 1000, n = (COALESCE(LENGTH(lg), 0) DIV 8);
-- Entries only grow, so a later `at_` never lands before the newest one (clock steps back).
SET at_ = IF(n > 0, GREATEST(nw, CAST(CONV(HEX(SUBSTRING(lg, 8 * (n - 1) + 1, 8)), 16, 10) AS SIGNED)), nw), h = 0;
-- Drop the entries that have left the window ending at `at_`.
WHILE h < n AND CAST(CONV(HEX(SUBSTRING(lg, 8 * (h) + 1, 8)), 16, 10) AS SIGNED) <= at_ - sz DO SET h = h + 1; END WHILE;
IF h > 0 THEN SET lg = SUBSTRING(lg, 8 * h + 1), n = n - h; END IF;
SET nx = at_ + sz;
IF n + 1 <= L THEN
  SET ok = 1, rty = 0;
ELSE
  SET ok = 0, rty = IF(1 > L, -1, ((CAST(CONV(HEX(SUBSTRING(lg, 8 * (n + 1 - L - 1) + 1, 8)), 16, 10) AS SIGNED) + sz - nw) + 999) DIV 1000);
END IF;
IF ok = 1 AND chg = 1 THEN
  SET lg = CONCAT(COALESCE(lg, ''), REPEAT(UNHEX(LPAD(HEX(at_), 16, '0')), 1));
  SET rem = L - n - 1, rst = ((at_ + sz) + 999) DIV 1000;
ELSE
  SET rem = GREATEST(0, L - n), rst = IF(n > 0, ((CAST(CONV(HEX(SUBSTRING(lg, 8 * (n - 1) + 1, 8)), 16, 10) AS SIGNED) + sz) + 999) DIV 1000, ((nw) + 999) DIV 1000);
END IF;
END;
ELSE SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'floodgate: unknown policy kind';
END CASE;
SET mk = IF(kd IN ('l', 'c'), IF((COALESCE(LENGTH(lg), 0) DIV 8) > 0, CAST(CONV(HEX(SUBSTRING(lg, 8 * ((COALESCE(LENGTH(lg), 0) DIV 8) - 1) + 1, 8)), 16, 10) AS SIGNED), 0), a);
IF ok = 0 THEN SET al = 0; END IF;
IF ok = 1 AND chg = 1 THEN UPDATE `floodgate` SET kind = kd, n1 = a, n2 = b, n3 = c, entries = lg, expires_us = nx WHERE k = kk;
SET mks = CONCAT(mks, ',', mk); END IF;
SET res = CONCAT(res, ',', ok, ',', rem, ',', rst, ',', rty);
SET p = p + 1;
END WHILE;
  END IF;
  SET life = wend - nw;
END IF;
IF req = 0 THEN SET ok = g > 0; END IF;
IF ok = 0 OR (g = 0 AND req = 0) OR mks = '' THEN SET mks = REPEAT(',0', CHAR_LENGTH(kinds)); END IF;
SET rec = CONCAT(ok, res, mks, ',', g);
IF g > 0 THEN
  INSERT INTO `floodgate` (k, kind, n1, n2, n3, entries, expires_us)
    VALUES (CONCAT(bs, ':l:', lid), 'l', nw + life, g, 0, rec, nw + life + 10000000);
END IF;
COMMIT;
IF sw > 0 THEN CALL `floodgate_v1_sweep`(nw - 60000000, sw); END IF;
SELECT CONCAT(rec, ',', IF(g > 0, life, 0), ',', nw) AS r;
END$$

DROP PROCEDURE IF EXISTS `floodgate_v1_consume_many`$$

CREATE PROCEDURE `floodgate_v1_consume_many`(IN ks LONGBLOB, IN kl TEXT, IN kss TEXT, IN numss LONGTEXT, IN cost BIGINT, IN tm BIGINT)
    MODIFIES SQL DATA
BEGIN
DECLARE nw BIGINT DEFAULT COALESCE(tm, TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)));
DECLARE n, p, fd, ok, al, chg INT DEFAULT 0;
DECLARE L, pr, a, b, c, rem, rst, rty, nx, mk BIGINT;
DECLARE lg LONGBLOB;
DECLARE kd CHAR(1);
DECLARE kk VARBINARY(3072);
DECLARE res, mks TEXT DEFAULT '';
DECLARE bu, bm BIGINT DEFAULT 0;
DECLARE bs VARBINARY(3000);
DECLARE kinds VARCHAR(32);
DECLARE nums VARCHAR(2048);
DECLARE np, j, at, allok INT DEFAULT 0;
DECLARE answer LONGTEXT DEFAULT '';
DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
START TRANSACTION;
SET np = CHAR_LENGTH(kss) - CHAR_LENGTH(REPLACE(kss, ',', '')) + 1, allok = IF(cost > 0, 1, 0);
WHILE j < np DO
SET bs = SUBSTRING(ks, at + 1, CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(kl, ',', j + 1), ',', -1) AS SIGNED)), at = at + CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(kl, ',', j + 1), ',', -1) AS SIGNED);
SET kinds = SUBSTRING_INDEX(SUBSTRING_INDEX(kss, ',', j + 1), ',', -1);
SET nums = SUBSTRING_INDEX(SUBSTRING_INDEX(numss, ';', j + 1), ';', -1);
SET bu = 0, bm = 0;
SET res = '', mks = '', al = 1;
SET n = CHAR_LENGTH(kinds), p = 0;
WHILE p < n DO
SET kd = SUBSTRING(kinds, p + 1, 1), L = CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(nums, ',', 3 * p + 1), ',', -1) AS SIGNED), pr = CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(nums, ',', 3 * p + 2), ',', -1) AS SIGNED);
SET kk = IF(p = 0, bs, CONCAT(bs, ':', p));
BEGIN
DECLARE tk CHAR(1);
DECLARE ex BIGINT;
DECLARE CONTINUE HANDLER FOR NOT FOUND SET fd = 0;
SET fd = 1;
IF 1 = 0 THEN
  SELECT s.kind, s.n1, s.n2, s.n3, s.entries, s.expires_us, IF(p = 0, COALESCE((SELECT z.n1 FROM `floodgate` z WHERE z.k = CONCAT(bs, ':b') AND z.kind = 'b' AND z.expires_us > nw), 0), bu) INTO tk, a, b, c, lg, ex, bu FROM `floodgate` s WHERE s.k = kk;
ELSE
  SELECT s.kind, s.n1, s.n2, s.n3, s.entries, s.expires_us, IF(p = 0, COALESCE((SELECT z.n1 FROM `floodgate` z WHERE z.k = CONCAT(bs, ':b') AND z.kind = 'b' AND z.expires_us > nw), 0), bu) INTO tk, a, b, c, lg, ex, bu FROM `floodgate` s WHERE s.k = kk FOR UPDATE;
  IF fd = 0 AND 1 = 1 THEN
    INSERT INTO `floodgate` (k, kind, n1, n2, n3, entries, expires_us) VALUES (kk, '', 0, 0, 0, NULL, 0)
      ON DUPLICATE KEY UPDATE expires_us = expires_us;
    SET fd = 1;
    SELECT s.kind, s.n1, s.n2, s.n3, s.entries, s.expires_us, IF(p = 0, COALESCE((SELECT z.n1 FROM `floodgate` z WHERE z.k = CONCAT(bs, ':b') AND z.kind = 'b' AND z.expires_us > nw), 0), bu) INTO tk, a, b, c, lg, ex, bu FROM `floodgate` s WHERE s.k = kk FOR UPDATE;
  END IF;
END IF;
IF fd = 0 AND p = 0 THEN
  SELECT z.n1 INTO bu FROM `floodgate` z WHERE z.k = CONCAT(bs, ':b') AND z.kind = 'b' AND z.expires_us > nw;
END IF;
IF fd = 0 OR tk <> kd THEN SET fd = 0, a = 0, b = 0, c = 0, lg = NULL; END IF;
END;
SET chg = 0;
CASE kd
WHEN 't' THEN
BEGIN
DECLARE tat, nxt, tau BIGINT;
SET tau = L * pr, tat = GREATEST(a, nw);
SET nxt = tat + cost * pr, nx = nxt;
IF cost <= L AND nxt - nw <= tau THEN
  SET ok = 1, rty = 0;
ELSE
  SET ok = 0, rty = IF(cost > L, -1, ((nxt - tau - nw) + 999) DIV 1000);
END IF;
IF ok = 1 AND chg = 1 THEN
  SET a = nxt, rem = (tau - (nxt - nw)) DIV pr, rst = ((nxt) + 999) DIV 1000;
ELSE
  -- Negative only after the clock stepped back past the stored arrival time.
  SET rem = GREATEST(0, tau - (tat - nw)) DIV pr, rst = ((tat) + 999) DIV 1000;
END IF;
END;
WHEN 'f' THEN
BEGIN
DECLARE sz, ix, cnt, en BIGINT;
SET sz = pr * 1000;
SET ix = GREATEST(nw DIV sz, a);
SET cnt = IF(a = ix, b, 0), en = (ix + 1) * sz;
SET rst = ((en) + 999) DIV 1000, nx = en;
IF cnt + cost <= L THEN
  SET ok = 1, rty = 0;
ELSE
  SET ok = 0, rty = IF(cost > L, -1, ((en - nw) + 999) DIV 1000);
END IF;
IF ok = 1 AND chg = 1 THEN
  SET a = ix, b = cnt + cost, rem = L - cnt - cost;
ELSE
  -- Above the limit only when a lowered limit reads state charged under a larger one.
  SET rem = GREATEST(0, L - cnt);
END IF;
END;
WHEN 's' THEN
BEGIN
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
  SET rty = GREATEST(1, IF((at_ * 1000 - nw) >= 0, ((at_ * 1000 - nw) + 1000 - 1) DIV 1000, -((-(at_ * 1000 - nw)) DIV 1000)));
END IF;
IF ok = 1 AND chg = 1 THEN
  SET a = ix, b = cur + cost, c = prv;
  SET rem = GREATEST(0, bud - (cur + cost) * pr) DIV pr, rst = st + 2 * pr;
ELSE
  SET rem = GREATEST(0, bud - cur * pr) DIV pr;
  SET rst = IF(cur > 0, st + 2 * pr, IF(prv > 0, st + pr, (nw + 999) DIV 1000));
END IF;
END;
WHEN 'l' THEN
BEGIN
DECLARE sz, at_, n, h BIGINT;
SET sz = pr * 1000, n = (COALESCE(LENGTH(lg), 0) DIV 8);
-- Entries only grow, so a later `at_` never lands before the newest one (clock steps back).
SET at_ = IF(n > 0, GREATEST(nw, CAST(CONV(HEX(SUBSTRING(lg, 8 * (n - 1) + 1, 8)), 16, 10) AS SIGNED)), nw), h = 0;
-- Drop the entries that have left the window ending at `at_`.
WHILE h < n AND CAST(CONV(HEX(SUBSTRING(lg, 8 * (h) + 1, 8)), 16, 10) AS SIGNED) <= at_ - sz DO SET h = h + 1; END WHILE;
IF h > 0 THEN SET lg = SUBSTRING(lg, 8 * h + 1), n = n - h; END IF;
SET nx = at_ + sz;
IF n + cost <= L THEN
  SET ok = 1, rty = 0;
ELSE
  SET ok = 0, rty = IF(cost > L, -1, ((CAST(CONV(HEX(SUBSTRING(lg, 8 * (n + cost - L - 1) + 1, 8)), 16, 10) AS SIGNED) + sz - nw) + 999) DIV 1000);
END IF;
IF ok = 1 AND chg = 1 THEN
  SET lg = CONCAT(COALESCE(lg, ''), REPEAT(UNHEX(LPAD(HEX(at_), 16, '0')), cost));
  SET rem = L - n - cost, rst = ((at_ + sz) + 999) DIV 1000;
ELSE
  SET rem = GREATEST(0, L - n), rst = IF(n > 0, ((CAST(CONV(HEX(SUBSTRING(lg, 8 * (n - 1) + 1, 8)), 16, 10) AS SIGNED) + sz) + 999) DIV 1000, ((nw) + 999) DIV 1000);
END IF;
END;
WHEN 'c' THEN
BEGIN
DECLARE sz, at_, n, h BIGINT;
SET sz = pr * 1000, n = (COALESCE(LENGTH(lg), 0) DIV 8);
-- Entries only grow, so a later `at_` never lands before the newest one (clock steps back).
SET at_ = IF(n > 0, GREATEST(nw, CAST(CONV(HEX(SUBSTRING(lg, 8 * (n - 1) + 1, 8)), 16, 10) AS SIGNED)), nw), h = 0;
-- Drop the entries that have left the window ending at `at_`.
WHILE h < n AND CAST(CONV(HEX(SUBSTRING(lg, 8 * (h) + 1, 8)), 16, 10) AS SIGNED) <= at_ - sz DO SET h = h + 1; END WHILE;
IF h > 0 THEN SET lg = SUBSTRING(lg, 8 * h + 1), n = n - h; END IF;
SET nx = at_ + sz;
IF n + 1 <= L THEN
  SET ok = 1, rty = 0;
ELSE
  SET ok = 0, rty = IF(1 > L, -1, ((CAST(CONV(HEX(SUBSTRING(lg, 8 * (n + 1 - L - 1) + 1, 8)), 16, 10) AS SIGNED) + sz - nw) + 999) DIV 1000);
END IF;
IF ok = 1 AND chg = 1 THEN
  SET lg = CONCAT(COALESCE(lg, ''), REPEAT(UNHEX(LPAD(HEX(at_), 16, '0')), 1));
  SET rem = L - n - 1, rst = ((at_ + sz) + 999) DIV 1000;
ELSE
  SET rem = GREATEST(0, L - n), rst = IF(n > 0, ((CAST(CONV(HEX(SUBSTRING(lg, 8 * (n - 1) + 1, 8)), 16, 10) AS SIGNED) + sz) + 999) DIV 1000, ((nw) + 999) DIV 1000);
END IF;
END;
ELSE SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'floodgate: unknown policy kind';
END CASE;
SET mk = IF(kd IN ('l', 'c'), IF((COALESCE(LENGTH(lg), 0) DIV 8) > 0, CAST(CONV(HEX(SUBSTRING(lg, 8 * ((COALESCE(LENGTH(lg), 0) DIV 8) - 1) + 1, 8)), 16, 10) AS SIGNED), 0), a);
IF ok = 0 THEN SET al = 0; END IF;
SET res = CONCAT(res, ',', ok, ',', rem, ',', rst, ',', rty);
SET p = p + 1;
END WHILE;
IF al = 0 AND cost > 0 AND bu = 0 THEN
  SET n = CHAR_LENGTH(kinds), p = 0;
WHILE p < n DO
SET kd = SUBSTRING(kinds, p + 1, 1), L = CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(nums, ',', 3 * p + 1), ',', -1) AS SIGNED), pr = CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(nums, ',', 3 * p + 2), ',', -1) AS SIGNED);
SET kk = IF(p = 0, bs, CONCAT(bs, ':', p));
IF CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(nums, ',', 3 * p + 3), ',', -1) AS SIGNED) > bm AND CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(SUBSTRING(res, 2), ',', 4 * p + 1), ',', -1) AS SIGNED) = 0 THEN SET bm = CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(nums, ',', 3 * p + 3), ',', -1) AS SIGNED); END IF;
SET p = p + 1;
END WHILE;
  IF bm > 0 THEN
    SET bu = nw + bm * 1000;
    INSERT INTO `floodgate` (k, kind, n1, n2, n3, entries, expires_us) VALUES (CONCAT(bs, ':b'), 'b', bu, 0, 0, NULL, bu)
  ON DUPLICATE KEY UPDATE kind = 'b', n1 = bu, n2 = 0, n3 = 0, entries = NULL, expires_us = bu;
UPDATE `floodgate` SET entries = IF(kind = 'l', entries, NULL), n1 = IF(kind = 'l', 0, n1) WHERE k = bs AND ((kind IN ('t', 'f', 's') AND entries = '') OR (kind = 'l' AND n1 = 1));
  END IF;
END IF;
IF al = 0 OR bu > 0 THEN SET allok = 0; END IF;
SET answer = CONCAT(answer, ';', bu, ',', nw, ',', IF(bu > 0, 0, al), res);
SET j = j + 1;
END WHILE;
IF allok = 1 THEN
  SET answer = '', j = 0, at = 0;
  WHILE j < np DO
SET bs = SUBSTRING(ks, at + 1, CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(kl, ',', j + 1), ',', -1) AS SIGNED)), at = at + CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(kl, ',', j + 1), ',', -1) AS SIGNED);
SET kinds = SUBSTRING_INDEX(SUBSTRING_INDEX(kss, ',', j + 1), ',', -1);
SET nums = SUBSTRING_INDEX(SUBSTRING_INDEX(numss, ';', j + 1), ';', -1);
SET res = '', mks = '', al = 1;
SET n = CHAR_LENGTH(kinds), p = 0;
WHILE p < n DO
SET kd = SUBSTRING(kinds, p + 1, 1), L = CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(nums, ',', 3 * p + 1), ',', -1) AS SIGNED), pr = CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(nums, ',', 3 * p + 2), ',', -1) AS SIGNED);
SET kk = IF(p = 0, bs, CONCAT(bs, ':', p));
BEGIN
DECLARE tk CHAR(1);
DECLARE ex BIGINT;
DECLARE CONTINUE HANDLER FOR NOT FOUND SET fd = 0;
SET fd = 1;
IF 1 = 0 THEN
  SELECT s.kind, s.n1, s.n2, s.n3, s.entries, s.expires_us INTO tk, a, b, c, lg, ex FROM `floodgate` s WHERE s.k = kk;
ELSE
  SELECT s.kind, s.n1, s.n2, s.n3, s.entries, s.expires_us INTO tk, a, b, c, lg, ex FROM `floodgate` s WHERE s.k = kk FOR UPDATE;
  IF fd = 0 AND 1 = 1 THEN
    INSERT INTO `floodgate` (k, kind, n1, n2, n3, entries, expires_us) VALUES (kk, '', 0, 0, 0, NULL, 0)
      ON DUPLICATE KEY UPDATE expires_us = expires_us;
    SET fd = 1;
    SELECT s.kind, s.n1, s.n2, s.n3, s.entries, s.expires_us INTO tk, a, b, c, lg, ex FROM `floodgate` s WHERE s.k = kk FOR UPDATE;
  END IF;
END IF;
IF fd = 0 OR tk <> kd THEN SET fd = 0, a = 0, b = 0, c = 0, lg = NULL; END IF;
END;
SET chg = 1;
CASE kd
WHEN 't' THEN
BEGIN
DECLARE tat, nxt, tau BIGINT;
SET tau = L * pr, tat = GREATEST(a, nw);
SET nxt = tat + cost * pr, nx = nxt;
IF cost <= L AND nxt - nw <= tau THEN
  SET ok = 1, rty = 0;
ELSE
  SET ok = 0, rty = IF(cost > L, -1, ((nxt - tau - nw) + 999) DIV 1000);
END IF;
IF ok = 1 AND chg = 1 THEN
  SET a = nxt, rem = (tau - (nxt - nw)) DIV pr, rst = ((nxt) + 999) DIV 1000;
ELSE
  -- Negative only after the clock stepped back past the stored arrival time.
  SET rem = GREATEST(0, tau - (tat - nw)) DIV pr, rst = ((tat) + 999) DIV 1000;
END IF;
END;
WHEN 'f' THEN
BEGIN
DECLARE sz, ix, cnt, en BIGINT;
SET sz = pr * 1000;
SET ix = GREATEST(nw DIV sz, a);
SET cnt = IF(a = ix, b, 0), en = (ix + 1) * sz;
SET rst = ((en) + 999) DIV 1000, nx = en;
IF cnt + cost <= L THEN
  SET ok = 1, rty = 0;
ELSE
  SET ok = 0, rty = IF(cost > L, -1, ((en - nw) + 999) DIV 1000);
END IF;
IF ok = 1 AND chg = 1 THEN
  SET a = ix, b = cnt + cost, rem = L - cnt - cost;
ELSE
  -- Above the limit only when a lowered limit reads state charged under a larger one.
  SET rem = GREATEST(0, L - cnt);
END IF;
END;
WHEN 's' THEN
BEGIN
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
  SET rty = GREATEST(1, IF((at_ * 1000 - nw) >= 0, ((at_ * 1000 - nw) + 1000 - 1) DIV 1000, -((-(at_ * 1000 - nw)) DIV 1000)));
END IF;
IF ok = 1 AND chg = 1 THEN
  SET a = ix, b = cur + cost, c = prv;
  SET rem = GREATEST(0, bud - (cur + cost) * pr) DIV pr, rst = st + 2 * pr;
ELSE
  SET rem = GREATEST(0, bud - cur * pr) DIV pr;
  SET rst = IF(cur > 0, st + 2 * pr, IF(prv > 0, st + pr, (nw + 999) DIV 1000));
END IF;
END;
WHEN 'l' THEN
BEGIN
DECLARE sz, at_, n, h BIGINT;
SET sz = pr * 1000, n = (COALESCE(LENGTH(lg), 0) DIV 8);
-- Entries only grow, so a later `at_` never lands before the newest one (clock steps back).
SET at_ = IF(n > 0, GREATEST(nw, CAST(CONV(HEX(SUBSTRING(lg, 8 * (n - 1) + 1, 8)), 16, 10) AS SIGNED)), nw), h = 0;
-- Drop the entries that have left the window ending at `at_`.
WHILE h < n AND CAST(CONV(HEX(SUBSTRING(lg, 8 * (h) + 1, 8)), 16, 10) AS SIGNED) <= at_ - sz DO SET h = h + 1; END WHILE;
IF h > 0 THEN SET lg = SUBSTRING(lg, 8 * h + 1), n = n - h; END IF;
SET nx = at_ + sz;
IF n + cost <= L THEN
  SET ok = 1, rty = 0;
ELSE
  SET ok = 0, rty = IF(cost > L, -1, ((CAST(CONV(HEX(SUBSTRING(lg, 8 * (n + cost - L - 1) + 1, 8)), 16, 10) AS SIGNED) + sz - nw) + 999) DIV 1000);
END IF;
IF ok = 1 AND chg = 1 THEN
  SET lg = CONCAT(COALESCE(lg, ''), REPEAT(UNHEX(LPAD(HEX(at_), 16, '0')), cost));
  SET rem = L - n - cost, rst = ((at_ + sz) + 999) DIV 1000;
ELSE
  SET rem = GREATEST(0, L - n), rst = IF(n > 0, ((CAST(CONV(HEX(SUBSTRING(lg, 8 * (n - 1) + 1, 8)), 16, 10) AS SIGNED) + sz) + 999) DIV 1000, ((nw) + 999) DIV 1000);
END IF;
END;
WHEN 'c' THEN
BEGIN
DECLARE sz, at_, n, h BIGINT;
SET sz = pr * 1000, n = (COALESCE(LENGTH(lg), 0) DIV 8);
-- Entries only grow, so a later `at_` never lands before the newest one (clock steps back).
SET at_ = IF(n > 0, GREATEST(nw, CAST(CONV(HEX(SUBSTRING(lg, 8 * (n - 1) + 1, 8)), 16, 10) AS SIGNED)), nw), h = 0;
-- Drop the entries that have left the window ending at `at_`.
WHILE h < n AND CAST(CONV(HEX(SUBSTRING(lg, 8 * (h) + 1, 8)), 16, 10) AS SIGNED) <= at_ - sz DO SET h = h + 1; END WHILE;
IF h > 0 THEN SET lg = SUBSTRING(lg, 8 * h + 1), n = n - h; END IF;
SET nx = at_ + sz;
IF n + 1 <= L THEN
  SET ok = 1, rty = 0;
ELSE
  SET ok = 0, rty = IF(1 > L, -1, ((CAST(CONV(HEX(SUBSTRING(lg, 8 * (n + 1 - L - 1) + 1, 8)), 16, 10) AS SIGNED) + sz - nw) + 999) DIV 1000);
END IF;
IF ok = 1 AND chg = 1 THEN
  SET lg = CONCAT(COALESCE(lg, ''), REPEAT(UNHEX(LPAD(HEX(at_), 16, '0')), 1));
  SET rem = L - n - 1, rst = ((at_ + sz) + 999) DIV 1000;
ELSE
  SET rem = GREATEST(0, L - n), rst = IF(n > 0, ((CAST(CONV(HEX(SUBSTRING(lg, 8 * (n - 1) + 1, 8)), 16, 10) AS SIGNED) + sz) + 999) DIV 1000, ((nw) + 999) DIV 1000);
END IF;
END;
ELSE SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'floodgate: unknown policy kind';
END CASE;
SET mk = IF(kd IN ('l', 'c'), IF((COALESCE(LENGTH(lg), 0) DIV 8) > 0, CAST(CONV(HEX(SUBSTRING(lg, 8 * ((COALESCE(LENGTH(lg), 0) DIV 8) - 1) + 1, 8)), 16, 10) AS SIGNED), 0), a);
IF ok = 0 THEN SET al = 0; END IF;
IF ok = 1 AND chg = 1 THEN UPDATE `floodgate` SET kind = kd, n1 = a, n2 = b, n3 = c, entries = lg, expires_us = nx WHERE k = kk;
SET mks = CONCAT(mks, ',', mk); END IF;
SET res = CONCAT(res, ',', ok, ',', rem, ',', rst, ',', rty);
SET p = p + 1;
END WHILE;
SET answer = CONCAT(answer, ';0,', nw, ',1', res, mks);
  SET j = j + 1;
  END WHILE;
END IF;
COMMIT;
SELECT CONCAT(allok, answer) AS r;
END$$

DROP PROCEDURE IF EXISTS `floodgate_v1_consume_t`$$

CREATE PROCEDURE `floodgate_v1_consume_t`(IN bs VARBINARY(3000), IN L BIGINT, IN pr BIGINT, IN bm BIGINT, IN cost BIGINT, IN tm BIGINT, IN sw INT)
    MODIFIES SQL DATA
proc: BEGIN
DECLARE nw BIGINT DEFAULT COALESCE(tm, TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)));
DECLARE bu BIGINT DEFAULT 0;
IF cost <= L THEN
  -- An UPDATE of one row by its whole primary key locks that record only, at any isolation level.
  SET @fg_ok = NULL;
  UPDATE `floodgate` SET kind = IF(LENGTH(CONCAT_WS(',', (@fg_a := IF(kind = 't', n1, 0)), (@fg_b := IF(kind = 't', n2, 0)), (@fg_c := IF(kind = 't', n3, 0)), (@fg_n1 := GREATEST(@fg_a, nw) + cost * pr), (@fg_ok := cost <= L AND @fg_n1 - nw <= L * pr), (@fg_n2 := @fg_b), (@fg_n3 := @fg_c), (@fg_nx := ((@fg_n1) DIV 60000000 + 1) * 60000000))) > 0 AND @fg_ok, 't', kind),
    n1 = IF(@fg_ok, @fg_n1, n1), n2 = IF(@fg_ok, @fg_n2, n2), n3 = IF(@fg_ok, @fg_n3, n3),
    entries = IF(@fg_ok, '', entries), expires_us = IF(@fg_ok, @fg_nx, expires_us)
    WHERE k = bs AND kind = 't' AND entries = '';
  IF @fg_ok IS NULL THEN
    SELECT COALESCE((SELECT MAX(z.n1) FROM `floodgate` z WHERE z.k = CONCAT(bs, ':b') AND z.kind = 'b' AND z.expires_us > nw), 0) INTO bu;
    IF bu = 0 THEN
      -- Read committed: at REPEATABLE READ a missing row's duplicate check would lock its gap.
      SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
      INSERT INTO `floodgate` (k, kind, n1, n2, n3, entries, expires_us)
  VALUES (bs, 't', @fg_n1 := nw + cost * pr, @fg_n2 := 0, @fg_n3 := 0, IF(@fg_ok := 1, '', ''), @fg_nx := ((nw + cost * pr) DIV 60000000 + 1) * 60000000)
  ON DUPLICATE KEY UPDATE
    kind = IF(LENGTH(CONCAT_WS(',', (@fg_a := IF(kind = 't', n1, 0)), (@fg_b := IF(kind = 't', n2, 0)), (@fg_c := IF(kind = 't', n3, 0)), (@fg_n1 := GREATEST(@fg_a, nw) + cost * pr), (@fg_ok := cost <= L AND @fg_n1 - nw <= L * pr), (@fg_n2 := @fg_b), (@fg_n3 := @fg_c), (@fg_nx := ((@fg_n1) DIV 60000000 + 1) * 60000000))) > 0 AND @fg_ok, 't', kind),
    n1 = IF(@fg_ok, @fg_n1, n1), n2 = IF(@fg_ok, @fg_n2, n2), n3 = IF(@fg_ok, @fg_n3, n3),
    entries = IF(@fg_ok, '', entries), expires_us = IF(@fg_ok, @fg_nx, expires_us);
      IF @fg_ok AND COALESCE((SELECT MAX(z.n1) FROM `floodgate` z WHERE z.k = CONCAT(bs, ':b') AND z.kind = 'b' AND z.expires_us > nw), 0) > 0 THEN
        UPDATE `floodgate` SET entries = IF(kind = 'l', entries, NULL), n1 = IF(kind = 'l', 0, n1) WHERE k = bs AND ((kind IN ('t', 'f', 's') AND entries = '') OR (kind = 'l' AND n1 = 1));
      END IF;
    END IF;
  END IF;
  -- A session out of autocommit (against the store's requirement) would keep the row locked.
  IF @@autocommit = 0 THEN COMMIT; END IF;
  IF bu = 0 AND @fg_ok THEN
    IF sw > 0 THEN
  BEGIN
    DECLARE CONTINUE HANDLER FOR SQLEXCEPTION BEGIN END;
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    DELETE FROM `floodgate` WHERE expires_us < nw - 60000000 LIMIT sw;
  END;
END IF;
    SELECT CONCAT('0,', nw, ',1,1,', (L * pr - (@fg_n1 - nw)) DIV pr, ',', ((@fg_n1) + 999) DIV 1000, ',0,', @fg_n1) AS r;
    LEAVE proc;
  END IF;
ELSE
  SELECT COALESCE((SELECT MAX(z.n1) FROM `floodgate` z WHERE z.k = CONCAT(bs, ':b') AND z.kind = 'b' AND z.expires_us > nw), 0) INTO bu;
END IF;
BEGIN
  DECLARE ok INT DEFAULT 0;
  DECLARE chg INT DEFAULT IF(bu > 0, 0, 1);
  DECLARE a, b, c, rem, rst, rty, nx BIGINT DEFAULT 0;
  DECLARE tk CHAR(1);
  DECLARE lg LONGBLOB;
  IF bu = 0 AND cost <= L THEN
    SET a = @fg_a, b = @fg_b, c = @fg_c;
  ELSE
    SELECT MAX(s.kind), MAX(s.n1), MAX(s.n2), MAX(s.n3), MAX(s.entries) INTO tk, a, b, c, lg FROM `floodgate` s WHERE s.k = bs;
    IF tk IS NULL OR tk <> 't' THEN SET a = 0, b = 0, c = 0, lg = NULL; END IF;
  END IF;
BEGIN
DECLARE tat, nxt, tau BIGINT;
SET tau = L * pr, tat = GREATEST(a, nw);
SET nxt = tat + cost * pr, nx = nxt;
IF cost <= L AND nxt - nw <= tau THEN
  SET ok = 1, rty = 0;
ELSE
  SET ok = 0, rty = IF(cost > L, -1, ((nxt - tau - nw) + 999) DIV 1000);
END IF;
IF ok = 1 AND chg = 1 THEN
  SET a = nxt, rem = (tau - (nxt - nw)) DIV pr, rst = ((nxt) + 999) DIV 1000;
ELSE
  -- Negative only after the clock stepped back past the stored arrival time.
  SET rem = GREATEST(0, tau - (tat - nw)) DIV pr, rst = ((tat) + 999) DIV 1000;
END IF;
END;
  IF ok = 1 AND bu = 0 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'floodgate: the statement and the apply fragment disagree';
  END IF;
  IF chg = 1 AND bm > 0 THEN
    SET bu = nw + bm * 1000;
    INSERT INTO `floodgate` (k, kind, n1, n2, n3, entries, expires_us) VALUES (CONCAT(bs, ':b'), 'b', bu, 0, 0, NULL, bu)
  ON DUPLICATE KEY UPDATE kind = 'b', n1 = bu, n2 = 0, n3 = 0, entries = NULL, expires_us = bu;
UPDATE `floodgate` SET entries = IF(kind = 'l', entries, NULL), n1 = IF(kind = 'l', 0, n1) WHERE k = bs AND ((kind IN ('t', 'f', 's') AND entries = '') OR (kind = 'l' AND n1 = 1));
  END IF;
  IF sw > 0 THEN
  BEGIN
    DECLARE CONTINUE HANDLER FOR SQLEXCEPTION BEGIN END;
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    DELETE FROM `floodgate` WHERE expires_us < nw - 60000000 LIMIT sw;
  END;
END IF;
  SELECT CONCAT(bu, ',', nw, ',0,', ok, ',', rem, ',', rst, ',', rty) AS r;
END;
END$$

DROP PROCEDURE IF EXISTS `floodgate_v1_consume_f`$$

CREATE PROCEDURE `floodgate_v1_consume_f`(IN bs VARBINARY(3000), IN L BIGINT, IN pr BIGINT, IN bm BIGINT, IN cost BIGINT, IN tm BIGINT, IN sw INT)
    MODIFIES SQL DATA
proc: BEGIN
DECLARE nw BIGINT DEFAULT COALESCE(tm, TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)));
DECLARE bu BIGINT DEFAULT 0;
IF cost <= L THEN
  -- An UPDATE of one row by its whole primary key locks that record only, at any isolation level.
  SET @fg_ok = NULL;
  UPDATE `floodgate` SET kind = IF(LENGTH(CONCAT_WS(',', (@fg_a := IF(kind = 'f', n1, 0)), (@fg_b := IF(kind = 'f', n2, 0)), (@fg_c := 0), (@fg_n1 := GREATEST(nw DIV (pr * 1000), @fg_a)), (@fg_n2 := IF(@fg_a = @fg_n1, @fg_b, 0) + cost), (@fg_ok := @fg_n2 <= L), (@fg_n3 := 0), (@fg_nx := (@fg_n1 + 1) * pr * 1000))) > 0 AND @fg_ok, 'f', kind),
    n1 = IF(@fg_ok, @fg_n1, n1), n2 = IF(@fg_ok, @fg_n2, n2), n3 = IF(@fg_ok, @fg_n3, n3),
    entries = IF(@fg_ok, '', entries), expires_us = IF(@fg_ok, @fg_nx, expires_us)
    WHERE k = bs AND kind = 'f' AND entries = '';
  IF @fg_ok IS NULL THEN
    SELECT COALESCE((SELECT MAX(z.n1) FROM `floodgate` z WHERE z.k = CONCAT(bs, ':b') AND z.kind = 'b' AND z.expires_us > nw), 0) INTO bu;
    IF bu = 0 THEN
      -- Read committed: at REPEATABLE READ a missing row's duplicate check would lock its gap.
      SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
      INSERT INTO `floodgate` (k, kind, n1, n2, n3, entries, expires_us)
  VALUES (bs, 'f', @fg_n1 := nw DIV (pr * 1000), @fg_n2 := cost, @fg_n3 := 0, IF(@fg_ok := 1, '', ''), @fg_nx := (nw DIV (pr * 1000) + 1) * pr * 1000)
  ON DUPLICATE KEY UPDATE
    kind = IF(LENGTH(CONCAT_WS(',', (@fg_a := IF(kind = 'f', n1, 0)), (@fg_b := IF(kind = 'f', n2, 0)), (@fg_c := 0), (@fg_n1 := GREATEST(nw DIV (pr * 1000), @fg_a)), (@fg_n2 := IF(@fg_a = @fg_n1, @fg_b, 0) + cost), (@fg_ok := @fg_n2 <= L), (@fg_n3 := 0), (@fg_nx := (@fg_n1 + 1) * pr * 1000))) > 0 AND @fg_ok, 'f', kind),
    n1 = IF(@fg_ok, @fg_n1, n1), n2 = IF(@fg_ok, @fg_n2, n2), n3 = IF(@fg_ok, @fg_n3, n3),
    entries = IF(@fg_ok, '', entries), expires_us = IF(@fg_ok, @fg_nx, expires_us);
      IF @fg_ok AND COALESCE((SELECT MAX(z.n1) FROM `floodgate` z WHERE z.k = CONCAT(bs, ':b') AND z.kind = 'b' AND z.expires_us > nw), 0) > 0 THEN
        UPDATE `floodgate` SET entries = IF(kind = 'l', entries, NULL), n1 = IF(kind = 'l', 0, n1) WHERE k = bs AND ((kind IN ('t', 'f', 's') AND entries = '') OR (kind = 'l' AND n1 = 1));
      END IF;
    END IF;
  END IF;
  -- A session out of autocommit (against the store's requirement) would keep the row locked.
  IF @@autocommit = 0 THEN COMMIT; END IF;
  IF bu = 0 AND @fg_ok THEN
    IF sw > 0 THEN
  BEGIN
    DECLARE CONTINUE HANDLER FOR SQLEXCEPTION BEGIN END;
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    DELETE FROM `floodgate` WHERE expires_us < nw - 60000000 LIMIT sw;
  END;
END IF;
    SELECT CONCAT('0,', nw, ',1,1,', L - @fg_n2, ',', ((@fg_nx) + 999) DIV 1000, ',0,', @fg_n1) AS r;
    LEAVE proc;
  END IF;
ELSE
  SELECT COALESCE((SELECT MAX(z.n1) FROM `floodgate` z WHERE z.k = CONCAT(bs, ':b') AND z.kind = 'b' AND z.expires_us > nw), 0) INTO bu;
END IF;
BEGIN
  DECLARE ok INT DEFAULT 0;
  DECLARE chg INT DEFAULT IF(bu > 0, 0, 1);
  DECLARE a, b, c, rem, rst, rty, nx BIGINT DEFAULT 0;
  DECLARE tk CHAR(1);
  DECLARE lg LONGBLOB;
  IF bu = 0 AND cost <= L THEN
    SET a = @fg_a, b = @fg_b, c = @fg_c;
  ELSE
    SELECT MAX(s.kind), MAX(s.n1), MAX(s.n2), MAX(s.n3), MAX(s.entries) INTO tk, a, b, c, lg FROM `floodgate` s WHERE s.k = bs;
    IF tk IS NULL OR tk <> 'f' THEN SET a = 0, b = 0, c = 0, lg = NULL; END IF;
  END IF;
BEGIN
DECLARE sz, ix, cnt, en BIGINT;
SET sz = pr * 1000;
SET ix = GREATEST(nw DIV sz, a);
SET cnt = IF(a = ix, b, 0), en = (ix + 1) * sz;
SET rst = ((en) + 999) DIV 1000, nx = en;
IF cnt + cost <= L THEN
  SET ok = 1, rty = 0;
ELSE
  SET ok = 0, rty = IF(cost > L, -1, ((en - nw) + 999) DIV 1000);
END IF;
IF ok = 1 AND chg = 1 THEN
  SET a = ix, b = cnt + cost, rem = L - cnt - cost;
ELSE
  -- Above the limit only when a lowered limit reads state charged under a larger one.
  SET rem = GREATEST(0, L - cnt);
END IF;
END;
  IF ok = 1 AND bu = 0 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'floodgate: the statement and the apply fragment disagree';
  END IF;
  IF chg = 1 AND bm > 0 THEN
    SET bu = nw + bm * 1000;
    INSERT INTO `floodgate` (k, kind, n1, n2, n3, entries, expires_us) VALUES (CONCAT(bs, ':b'), 'b', bu, 0, 0, NULL, bu)
  ON DUPLICATE KEY UPDATE kind = 'b', n1 = bu, n2 = 0, n3 = 0, entries = NULL, expires_us = bu;
UPDATE `floodgate` SET entries = IF(kind = 'l', entries, NULL), n1 = IF(kind = 'l', 0, n1) WHERE k = bs AND ((kind IN ('t', 'f', 's') AND entries = '') OR (kind = 'l' AND n1 = 1));
  END IF;
  IF sw > 0 THEN
  BEGIN
    DECLARE CONTINUE HANDLER FOR SQLEXCEPTION BEGIN END;
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    DELETE FROM `floodgate` WHERE expires_us < nw - 60000000 LIMIT sw;
  END;
END IF;
  SELECT CONCAT(bu, ',', nw, ',0,', ok, ',', rem, ',', rst, ',', rty) AS r;
END;
END$$

DROP PROCEDURE IF EXISTS `floodgate_v1_consume_s`$$

CREATE PROCEDURE `floodgate_v1_consume_s`(IN bs VARBINARY(3000), IN L BIGINT, IN pr BIGINT, IN bm BIGINT, IN cost BIGINT, IN tm BIGINT, IN sw INT)
    MODIFIES SQL DATA
proc: BEGIN
DECLARE nw BIGINT DEFAULT COALESCE(tm, TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)));
DECLARE bu BIGINT DEFAULT 0;
IF cost <= L THEN
  -- An UPDATE of one row by its whole primary key locks that record only, at any isolation level.
  SET @fg_ok = NULL;
  UPDATE `floodgate` SET kind = IF(LENGTH(CONCAT_WS(',', (@fg_a := IF(kind = 's', n1, 0)), (@fg_b := IF(kind = 's', n2, 0)), (@fg_c := IF(kind = 's', n3, 0)), (@fg_n1 := GREATEST(nw DIV (pr * 1000), @fg_a)), (@fg_n2 := IF(@fg_a = @fg_n1, @fg_b, 0) + cost), (@fg_n3 := IF(@fg_a = @fg_n1, @fg_c, IF(@fg_a = @fg_n1 - 1, @fg_b, 0))), (@fg_ok := @fg_n2 * pr <= L * pr - @fg_n3 * (pr - (GREATEST(0, nw - @fg_n1 * pr * 1000) DIV 1000))), (@fg_nx := (@fg_n1 + 2) * pr * 1000))) > 0 AND @fg_ok, 's', kind),
    n1 = IF(@fg_ok, @fg_n1, n1), n2 = IF(@fg_ok, @fg_n2, n2), n3 = IF(@fg_ok, @fg_n3, n3),
    entries = IF(@fg_ok, '', entries), expires_us = IF(@fg_ok, @fg_nx, expires_us)
    WHERE k = bs AND kind = 's' AND entries = '';
  IF @fg_ok IS NULL THEN
    SELECT COALESCE((SELECT MAX(z.n1) FROM `floodgate` z WHERE z.k = CONCAT(bs, ':b') AND z.kind = 'b' AND z.expires_us > nw), 0) INTO bu;
    IF bu = 0 THEN
      -- Read committed: at REPEATABLE READ a missing row's duplicate check would lock its gap.
      SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
      INSERT INTO `floodgate` (k, kind, n1, n2, n3, entries, expires_us)
  VALUES (bs, 's', @fg_n1 := nw DIV (pr * 1000), @fg_n2 := cost, @fg_n3 := 0, IF(@fg_ok := 1, '', ''), @fg_nx := (nw DIV (pr * 1000) + 2) * pr * 1000)
  ON DUPLICATE KEY UPDATE
    kind = IF(LENGTH(CONCAT_WS(',', (@fg_a := IF(kind = 's', n1, 0)), (@fg_b := IF(kind = 's', n2, 0)), (@fg_c := IF(kind = 's', n3, 0)), (@fg_n1 := GREATEST(nw DIV (pr * 1000), @fg_a)), (@fg_n2 := IF(@fg_a = @fg_n1, @fg_b, 0) + cost), (@fg_n3 := IF(@fg_a = @fg_n1, @fg_c, IF(@fg_a = @fg_n1 - 1, @fg_b, 0))), (@fg_ok := @fg_n2 * pr <= L * pr - @fg_n3 * (pr - (GREATEST(0, nw - @fg_n1 * pr * 1000) DIV 1000))), (@fg_nx := (@fg_n1 + 2) * pr * 1000))) > 0 AND @fg_ok, 's', kind),
    n1 = IF(@fg_ok, @fg_n1, n1), n2 = IF(@fg_ok, @fg_n2, n2), n3 = IF(@fg_ok, @fg_n3, n3),
    entries = IF(@fg_ok, '', entries), expires_us = IF(@fg_ok, @fg_nx, expires_us);
      IF @fg_ok AND COALESCE((SELECT MAX(z.n1) FROM `floodgate` z WHERE z.k = CONCAT(bs, ':b') AND z.kind = 'b' AND z.expires_us > nw), 0) > 0 THEN
        UPDATE `floodgate` SET entries = IF(kind = 'l', entries, NULL), n1 = IF(kind = 'l', 0, n1) WHERE k = bs AND ((kind IN ('t', 'f', 's') AND entries = '') OR (kind = 'l' AND n1 = 1));
      END IF;
    END IF;
  END IF;
  -- A session out of autocommit (against the store's requirement) would keep the row locked.
  IF @@autocommit = 0 THEN COMMIT; END IF;
  IF bu = 0 AND @fg_ok THEN
    IF sw > 0 THEN
  BEGIN
    DECLARE CONTINUE HANDLER FOR SQLEXCEPTION BEGIN END;
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    DELETE FROM `floodgate` WHERE expires_us < nw - 60000000 LIMIT sw;
  END;
END IF;
    SELECT CONCAT('0,', nw, ',1,1,', GREATEST(0, L * pr - @fg_n3 * (pr - (GREATEST(0, nw - @fg_n1 * pr * 1000) DIV 1000)) - @fg_n2 * pr) DIV pr, ',', (@fg_n1 + 2) * pr, ',0,', @fg_n1) AS r;
    LEAVE proc;
  END IF;
ELSE
  SELECT COALESCE((SELECT MAX(z.n1) FROM `floodgate` z WHERE z.k = CONCAT(bs, ':b') AND z.kind = 'b' AND z.expires_us > nw), 0) INTO bu;
END IF;
BEGIN
  DECLARE ok INT DEFAULT 0;
  DECLARE chg INT DEFAULT IF(bu > 0, 0, 1);
  DECLARE a, b, c, rem, rst, rty, nx BIGINT DEFAULT 0;
  DECLARE tk CHAR(1);
  DECLARE lg LONGBLOB;
  IF bu = 0 AND cost <= L THEN
    SET a = @fg_a, b = @fg_b, c = @fg_c;
  ELSE
    SELECT MAX(s.kind), MAX(s.n1), MAX(s.n2), MAX(s.n3), MAX(s.entries) INTO tk, a, b, c, lg FROM `floodgate` s WHERE s.k = bs;
    IF tk IS NULL OR tk <> 's' THEN SET a = 0, b = 0, c = 0, lg = NULL; END IF;
  END IF;
BEGIN
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
  SET rty = GREATEST(1, IF((at_ * 1000 - nw) >= 0, ((at_ * 1000 - nw) + 1000 - 1) DIV 1000, -((-(at_ * 1000 - nw)) DIV 1000)));
END IF;
IF ok = 1 AND chg = 1 THEN
  SET a = ix, b = cur + cost, c = prv;
  SET rem = GREATEST(0, bud - (cur + cost) * pr) DIV pr, rst = st + 2 * pr;
ELSE
  SET rem = GREATEST(0, bud - cur * pr) DIV pr;
  SET rst = IF(cur > 0, st + 2 * pr, IF(prv > 0, st + pr, (nw + 999) DIV 1000));
END IF;
END;
  IF ok = 1 AND bu = 0 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'floodgate: the statement and the apply fragment disagree';
  END IF;
  IF chg = 1 AND bm > 0 THEN
    SET bu = nw + bm * 1000;
    INSERT INTO `floodgate` (k, kind, n1, n2, n3, entries, expires_us) VALUES (CONCAT(bs, ':b'), 'b', bu, 0, 0, NULL, bu)
  ON DUPLICATE KEY UPDATE kind = 'b', n1 = bu, n2 = 0, n3 = 0, entries = NULL, expires_us = bu;
UPDATE `floodgate` SET entries = IF(kind = 'l', entries, NULL), n1 = IF(kind = 'l', 0, n1) WHERE k = bs AND ((kind IN ('t', 'f', 's') AND entries = '') OR (kind = 'l' AND n1 = 1));
  END IF;
  IF sw > 0 THEN
  BEGIN
    DECLARE CONTINUE HANDLER FOR SQLEXCEPTION BEGIN END;
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    DELETE FROM `floodgate` WHERE expires_us < nw - 60000000 LIMIT sw;
  END;
END IF;
  SELECT CONCAT(bu, ',', nw, ',0,', ok, ',', rem, ',', rst, ',', rty) AS r;
END;
END$$

DROP PROCEDURE IF EXISTS `floodgate_v1_consume_l`$$

CREATE PROCEDURE `floodgate_v1_consume_l`(IN bs VARBINARY(3000), IN L BIGINT, IN pr BIGINT, IN bm BIGINT, IN cost BIGINT, IN tm BIGINT, IN sw INT)
    MODIFIES SQL DATA
proc: BEGIN
DECLARE nw BIGINT DEFAULT COALESCE(tm, TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)));
DECLARE bu BIGINT DEFAULT 0;
IF cost <= L THEN
  -- An UPDATE of one row by its whole primary key locks that record only, at any isolation level.
  SET @fg_ok = NULL, @fg_n = NULL;
  UPDATE `floodgate` SET kind = IF(LENGTH(CONCAT_WS(',', (@fg_n := COALESCE(LENGTH(entries), 0) DIV 8), (@fg_at := IF(@fg_n > 0, GREATEST(nw, CAST(CONV(HEX(SUBSTRING(entries, 8 * (@fg_n - 1) + 1, 8)), 16, 10) AS SIGNED)), nw)), (@fg_lo := GREATEST(0, @fg_n + cost - L)), (@fg_ok := cost <= L AND (@fg_lo = 0 OR CAST(CONV(HEX(SUBSTRING(entries, 8 * (@fg_lo - 1) + 1, 8)), 16, 10) AS SIGNED) <= @fg_at - pr * 1000)), (@fg_hi := IF(@fg_ok AND @fg_n - @fg_lo > 0 AND CAST(CONV(HEX(SUBSTRING(entries, 8 * (@fg_lo) + 1, 8)), 16, 10) AS SIGNED) <= @fg_at - pr * 1000,
      IF(CAST(CONV(HEX(SUBSTRING(entries, 8 * (@fg_n - 1) + 1, 8)), 16, 10) AS SIGNED) <= @fg_at - pr * 1000, @fg_lo := @fg_n, LEAST(@fg_n - 1, @fg_lo + 15)), @fg_lo)), (@fg_ok := IF(@fg_hi - @fg_lo > 0 AND CAST(CONV(HEX(SUBSTRING(entries, 8 * (@fg_hi) + 1, 8)), 16, 10) AS SIGNED) <= @fg_at - pr * 1000, NULL, @fg_ok)), (IF(@fg_hi - @fg_lo > 0, CONCAT_WS(',', @fg_m := (@fg_lo + @fg_hi) DIV 2,
      IF(CAST(CONV(HEX(SUBSTRING(entries, 8 * (@fg_m) + 1, 8)), 16, 10) AS SIGNED) <= @fg_at - pr * 1000, @fg_lo := @fg_m + 1, @fg_hi := @fg_m), IF(@fg_hi - @fg_lo > 0, CONCAT_WS(',', @fg_m := (@fg_lo + @fg_hi) DIV 2,
      IF(CAST(CONV(HEX(SUBSTRING(entries, 8 * (@fg_m) + 1, 8)), 16, 10) AS SIGNED) <= @fg_at - pr * 1000, @fg_lo := @fg_m + 1, @fg_hi := @fg_m), IF(@fg_hi - @fg_lo > 0, CONCAT_WS(',', @fg_m := (@fg_lo + @fg_hi) DIV 2,
      IF(CAST(CONV(HEX(SUBSTRING(entries, 8 * (@fg_m) + 1, 8)), 16, 10) AS SIGNED) <= @fg_at - pr * 1000, @fg_lo := @fg_m + 1, @fg_hi := @fg_m), IF(@fg_hi - @fg_lo > 0, CONCAT_WS(',', @fg_m := (@fg_lo + @fg_hi) DIV 2,
      IF(CAST(CONV(HEX(SUBSTRING(entries, 8 * (@fg_m) + 1, 8)), 16, 10) AS SIGNED) <= @fg_at - pr * 1000, @fg_lo := @fg_m + 1, @fg_hi := @fg_m), 0), 0)), 0)), 0)), 0)), (@fg_ok := IF(@fg_hi - @fg_lo > 0, NULL, @fg_ok)), (@fg_lg := IF(@fg_ok, NULL, entries)))) > 0 AND @fg_ok, 'l', kind),
    entries = IF(@fg_ok, CONCAT(IF(@fg_n > 0, SUBSTRING(entries, 8 * @fg_lo + 1), ''), REPEAT(UNHEX(LPAD(HEX(CAST(@fg_at AS SIGNED)), 16, '0')), cost)), entries),
    expires_us = IF(@fg_ok, @fg_at + pr * 1000, expires_us)
    WHERE k = bs AND kind = 'l' AND n1 = 1;
  IF @fg_n IS NULL THEN
    SELECT COALESCE((SELECT MAX(z.n1) FROM `floodgate` z WHERE z.k = CONCAT(bs, ':b') AND z.kind = 'b' AND z.expires_us > nw), 0) INTO bu;
    IF bu = 0 THEN
      -- Read committed: at REPEATABLE READ a missing row's duplicate check would lock its gap.
      SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
      INSERT INTO `floodgate` (k, kind, n1, n2, n3, entries, expires_us)
  VALUES (bs, 'l', IF(LENGTH(CONCAT_WS(',', @fg_n := 0, @fg_lo := 0, @fg_at := nw, @fg_ok := 1)) > 0, 1, 0), 0, 0, REPEAT(UNHEX(LPAD(HEX(nw), 16, '0')), cost), nw + pr * 1000)
  ON DUPLICATE KEY UPDATE
    kind = IF(LENGTH(CONCAT_WS(',', (@fg_n := IF(kind = 'l', COALESCE(LENGTH(entries), 0) DIV 8, 0)), (@fg_at := IF(@fg_n > 0, GREATEST(nw, CAST(CONV(HEX(SUBSTRING(entries, 8 * (@fg_n - 1) + 1, 8)), 16, 10) AS SIGNED)), nw)), (@fg_lo := GREATEST(0, @fg_n + cost - L)), (@fg_ok := cost <= L AND (@fg_lo = 0 OR CAST(CONV(HEX(SUBSTRING(entries, 8 * (@fg_lo - 1) + 1, 8)), 16, 10) AS SIGNED) <= @fg_at - pr * 1000)), (@fg_hi := IF(@fg_ok AND @fg_n - @fg_lo > 0 AND CAST(CONV(HEX(SUBSTRING(entries, 8 * (@fg_lo) + 1, 8)), 16, 10) AS SIGNED) <= @fg_at - pr * 1000,
      IF(CAST(CONV(HEX(SUBSTRING(entries, 8 * (@fg_n - 1) + 1, 8)), 16, 10) AS SIGNED) <= @fg_at - pr * 1000, @fg_lo := @fg_n, LEAST(@fg_n - 1, @fg_lo + 15)), @fg_lo)), (@fg_ok := IF(@fg_hi - @fg_lo > 0 AND CAST(CONV(HEX(SUBSTRING(entries, 8 * (@fg_hi) + 1, 8)), 16, 10) AS SIGNED) <= @fg_at - pr * 1000, NULL, @fg_ok)), (IF(@fg_hi - @fg_lo > 0, CONCAT_WS(',', @fg_m := (@fg_lo + @fg_hi) DIV 2,
      IF(CAST(CONV(HEX(SUBSTRING(entries, 8 * (@fg_m) + 1, 8)), 16, 10) AS SIGNED) <= @fg_at - pr * 1000, @fg_lo := @fg_m + 1, @fg_hi := @fg_m), IF(@fg_hi - @fg_lo > 0, CONCAT_WS(',', @fg_m := (@fg_lo + @fg_hi) DIV 2,
      IF(CAST(CONV(HEX(SUBSTRING(entries, 8 * (@fg_m) + 1, 8)), 16, 10) AS SIGNED) <= @fg_at - pr * 1000, @fg_lo := @fg_m + 1, @fg_hi := @fg_m), IF(@fg_hi - @fg_lo > 0, CONCAT_WS(',', @fg_m := (@fg_lo + @fg_hi) DIV 2,
      IF(CAST(CONV(HEX(SUBSTRING(entries, 8 * (@fg_m) + 1, 8)), 16, 10) AS SIGNED) <= @fg_at - pr * 1000, @fg_lo := @fg_m + 1, @fg_hi := @fg_m), IF(@fg_hi - @fg_lo > 0, CONCAT_WS(',', @fg_m := (@fg_lo + @fg_hi) DIV 2,
      IF(CAST(CONV(HEX(SUBSTRING(entries, 8 * (@fg_m) + 1, 8)), 16, 10) AS SIGNED) <= @fg_at - pr * 1000, @fg_lo := @fg_m + 1, @fg_hi := @fg_m), 0), 0)), 0)), 0)), 0)), (@fg_ok := IF(@fg_hi - @fg_lo > 0, NULL, @fg_ok)), (@fg_lg := IF(@fg_ok, NULL, entries)))) > 0 AND @fg_ok, 'l', kind),
    n1 = IF(@fg_ok, 1, n1), n2 = IF(@fg_ok, 0, n2), n3 = IF(@fg_ok, 0, n3),
    entries = IF(@fg_ok, CONCAT(IF(@fg_n > 0, SUBSTRING(entries, 8 * @fg_lo + 1), ''), REPEAT(UNHEX(LPAD(HEX(CAST(@fg_at AS SIGNED)), 16, '0')), cost)), entries),
    expires_us = IF(@fg_ok, @fg_at + pr * 1000, expires_us);
      IF @fg_ok AND COALESCE((SELECT MAX(z.n1) FROM `floodgate` z WHERE z.k = CONCAT(bs, ':b') AND z.kind = 'b' AND z.expires_us > nw), 0) > 0 THEN
        UPDATE `floodgate` SET entries = IF(kind = 'l', entries, NULL), n1 = IF(kind = 'l', 0, n1) WHERE k = bs AND ((kind IN ('t', 'f', 's') AND entries = '') OR (kind = 'l' AND n1 = 1));
      END IF;
    END IF;
  END IF;
  -- A session out of autocommit (against the store's requirement) would keep the row locked.
  IF @@autocommit = 0 THEN COMMIT; END IF;
  IF bu = 0 AND @fg_ok THEN
    IF sw > 0 THEN
  BEGIN
    DECLARE CONTINUE HANDLER FOR SQLEXCEPTION BEGIN END;
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    DELETE FROM `floodgate` WHERE expires_us < nw - 60000000 LIMIT sw;
  END;
END IF;
    SELECT CONCAT('0,', nw, ',1,1,', L - (@fg_n - @fg_lo) - cost, ',', ((@fg_at + pr * 1000) + 999) DIV 1000, ',0,', @fg_at) AS r;
    LEAVE proc;
  END IF;
  IF bu = 0 AND @fg_ok IS NULL THEN
BEGIN
DECLARE fd, ok, dup INT DEFAULT 0;
DECLARE chg INT DEFAULT 1;
DECLARE a, b, c, rem, rst, rty, nx, mk BIGINT DEFAULT 0;
DECLARE bu BIGINT DEFAULT 0;
DECLARE lg LONGBLOB;
DECLARE tk CHAR(1) DEFAULT '';
DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
START TRANSACTION;
decide: LOOP
  SET fd = 1, tk = '';
  BEGIN
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET fd = 0;
    -- The block is read after the row's lock is held: a block written before it is seen, one
    -- written after takes the mark off this row.
    SELECT s.kind, s.n1, s.n2, s.n3, s.entries, COALESCE((SELECT z.n1 FROM `floodgate` z WHERE z.k = CONCAT(bs, ':b') AND z.kind = 'b' AND z.expires_us > nw), 0)
      INTO tk, a, b, c, lg, bu FROM `floodgate` s WHERE s.k = bs FOR UPDATE;
  END;
  IF fd = 0 THEN
    SELECT COALESCE((SELECT z.n1 FROM `floodgate` z WHERE z.k = CONCAT(bs, ':b') AND z.kind = 'b' AND z.expires_us > nw), 0) INTO bu;
  END IF;
  IF fd = 0 OR tk <> 'l' THEN SET a = 0, b = 0, c = 0, lg = NULL; END IF;
  SET chg = IF(bu > 0, 0, 1);
BEGIN
DECLARE sz, at_, n, h BIGINT;
SET sz = pr * 1000, n = (COALESCE(LENGTH(lg), 0) DIV 8);
-- Entries only grow, so a later `at_` never lands before the newest one (clock steps back).
SET at_ = IF(n > 0, GREATEST(nw, CAST(CONV(HEX(SUBSTRING(lg, 8 * (n - 1) + 1, 8)), 16, 10) AS SIGNED)), nw), h = 0;
-- Drop the entries that have left the window ending at `at_`.
WHILE h < n AND CAST(CONV(HEX(SUBSTRING(lg, 8 * (h) + 1, 8)), 16, 10) AS SIGNED) <= at_ - sz DO SET h = h + 1; END WHILE;
IF h > 0 THEN SET lg = SUBSTRING(lg, 8 * h + 1), n = n - h; END IF;
SET nx = at_ + sz;
IF n + cost <= L THEN
  SET ok = 1, rty = 0;
ELSE
  SET ok = 0, rty = IF(cost > L, -1, ((CAST(CONV(HEX(SUBSTRING(lg, 8 * (n + cost - L - 1) + 1, 8)), 16, 10) AS SIGNED) + sz - nw) + 999) DIV 1000);
END IF;
IF ok = 1 AND chg = 1 THEN
  SET lg = CONCAT(COALESCE(lg, ''), REPEAT(UNHEX(LPAD(HEX(at_), 16, '0')), cost));
  SET rem = L - n - cost, rst = ((at_ + sz) + 999) DIV 1000;
ELSE
  SET rem = GREATEST(0, L - n), rst = IF(n > 0, ((CAST(CONV(HEX(SUBSTRING(lg, 8 * (n - 1) + 1, 8)), 16, 10) AS SIGNED) + sz) + 999) DIV 1000, ((nw) + 999) DIV 1000);
END IF;
END;
  IF ok = 1 AND chg = 1 THEN
    SET mk = IF(COALESCE(LENGTH(lg), 0) >= 8, CAST(CONV(HEX(RIGHT(lg, 8)), 16, 10) AS SIGNED), 0);
    IF fd = 1 THEN
      UPDATE `floodgate` SET kind = 'l', n1 = 1, n2 = 0, n3 = 0, entries = lg, expires_us = nx WHERE k = bs;
    ELSE
      BEGIN
        DECLARE CONTINUE HANDLER FOR 1062 SET dup = 1;
        INSERT INTO `floodgate` (k, kind, n1, n2, n3, entries, expires_us) VALUES (bs, 'l', 1, 0, 0, lg, nx);
      END;
      IF dup = 1 THEN
        SET dup = 0;
        ITERATE decide;
      END IF;
    END IF;
  ELSEIF ok = 0 AND chg = 1 AND bm > 0 THEN
    SET bu = nw + bm * 1000;
    INSERT INTO `floodgate` (k, kind, n1, n2, n3, entries, expires_us) VALUES (CONCAT(bs, ':b'), 'b', bu, 0, 0, NULL, bu)
  ON DUPLICATE KEY UPDATE kind = 'b', n1 = bu, n2 = 0, n3 = 0, entries = NULL, expires_us = bu;
UPDATE `floodgate` SET entries = IF(kind = 'l', entries, NULL), n1 = IF(kind = 'l', 0, n1) WHERE k = bs AND ((kind IN ('t', 'f', 's') AND entries = '') OR (kind = 'l' AND n1 = 1));

  END IF;
  LEAVE decide;
END LOOP;
COMMIT;
IF sw > 0 THEN
  BEGIN
    DECLARE CONTINUE HANDLER FOR SQLEXCEPTION BEGIN END;
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    DELETE FROM `floodgate` WHERE expires_us < nw - 60000000 LIMIT sw;
  END;
END IF;
SELECT CONCAT(bu, ',', nw, ',', IF(bu > 0, 0, ok), ',', ok, ',', rem, ',', rst, ',', rty, IF(ok = 1 AND bu = 0, CONCAT(',', mk), '')) AS r;
END;
    LEAVE proc;
  END IF;
ELSE
  SELECT COALESCE((SELECT MAX(z.n1) FROM `floodgate` z WHERE z.k = CONCAT(bs, ':b') AND z.kind = 'b' AND z.expires_us > nw), 0) INTO bu;
END IF;
BEGIN
  DECLARE ok INT DEFAULT 0;
  DECLARE chg INT DEFAULT IF(bu > 0, 0, 1);
  DECLARE a, b, c, rem, rst, rty, nx BIGINT DEFAULT 0;
  DECLARE tk CHAR(1);
  DECLARE lg LONGBLOB;
  IF bu = 0 AND cost <= L THEN
    SET lg = @fg_lg;
  ELSE
    SELECT MAX(s.kind), MAX(s.n1), MAX(s.n2), MAX(s.n3), MAX(s.entries) INTO tk, a, b, c, lg FROM `floodgate` s WHERE s.k = bs;
    IF tk IS NULL OR tk <> 'l' THEN SET a = 0, b = 0, c = 0, lg = NULL; END IF;
  END IF;
BEGIN
DECLARE sz, at_, n, h BIGINT;
SET sz = pr * 1000, n = (COALESCE(LENGTH(lg), 0) DIV 8);
-- Entries only grow, so a later `at_` never lands before the newest one (clock steps back).
SET at_ = IF(n > 0, GREATEST(nw, CAST(CONV(HEX(SUBSTRING(lg, 8 * (n - 1) + 1, 8)), 16, 10) AS SIGNED)), nw), h = 0;
-- Drop the entries that have left the window ending at `at_`.
WHILE h < n AND CAST(CONV(HEX(SUBSTRING(lg, 8 * (h) + 1, 8)), 16, 10) AS SIGNED) <= at_ - sz DO SET h = h + 1; END WHILE;
IF h > 0 THEN SET lg = SUBSTRING(lg, 8 * h + 1), n = n - h; END IF;
SET nx = at_ + sz;
IF n + cost <= L THEN
  SET ok = 1, rty = 0;
ELSE
  SET ok = 0, rty = IF(cost > L, -1, ((CAST(CONV(HEX(SUBSTRING(lg, 8 * (n + cost - L - 1) + 1, 8)), 16, 10) AS SIGNED) + sz - nw) + 999) DIV 1000);
END IF;
IF ok = 1 AND chg = 1 THEN
  SET lg = CONCAT(COALESCE(lg, ''), REPEAT(UNHEX(LPAD(HEX(at_), 16, '0')), cost));
  SET rem = L - n - cost, rst = ((at_ + sz) + 999) DIV 1000;
ELSE
  SET rem = GREATEST(0, L - n), rst = IF(n > 0, ((CAST(CONV(HEX(SUBSTRING(lg, 8 * (n - 1) + 1, 8)), 16, 10) AS SIGNED) + sz) + 999) DIV 1000, ((nw) + 999) DIV 1000);
END IF;
END;
  IF ok = 1 AND bu = 0 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'floodgate: the statement and the apply fragment disagree';
  END IF;
  IF chg = 1 AND bm > 0 THEN
    SET bu = nw + bm * 1000;
    INSERT INTO `floodgate` (k, kind, n1, n2, n3, entries, expires_us) VALUES (CONCAT(bs, ':b'), 'b', bu, 0, 0, NULL, bu)
  ON DUPLICATE KEY UPDATE kind = 'b', n1 = bu, n2 = 0, n3 = 0, entries = NULL, expires_us = bu;
UPDATE `floodgate` SET entries = IF(kind = 'l', entries, NULL), n1 = IF(kind = 'l', 0, n1) WHERE k = bs AND ((kind IN ('t', 'f', 's') AND entries = '') OR (kind = 'l' AND n1 = 1));
  END IF;
  IF sw > 0 THEN
  BEGIN
    DECLARE CONTINUE HANDLER FOR SQLEXCEPTION BEGIN END;
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    DELETE FROM `floodgate` WHERE expires_us < nw - 60000000 LIMIT sw;
  END;
END IF;
  SELECT CONCAT(bu, ',', nw, ',0,', ok, ',', rem, ',', rst, ',', rty) AS r;
END;
END$$

DELIMITER ;
