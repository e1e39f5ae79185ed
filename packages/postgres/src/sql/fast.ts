import { APPLY } from "./algorithms.ts";
import { NOW, NUMS, POLICY } from "./common.ts";

/*
 * The consume function's fast path: one counter policy (token bucket, fixed window, sliding
 * window) on a key whose row exists under the same kinds, with no reservation, no block in force
 * and no sweep due. It locks and reads the row, reads the clock, runs the policy's `apply` once
 * (the same fragment as the general path, so the same doubles), and either writes the charge
 * (one UPDATE) or answers the denial or the peek without writing. The general path evaluates a
 * set twice (decide every policy, then charge every policy) and carries a log's entries, a
 * new row's insert and a block's bookkeeping through every decision; one policy needs none of
 * that.
 *
 * Anything else falls through to the general path, which reads the row again (its lock is
 * already held) and decides from scratch: no row yet, other kinds stored, a block in force, a
 * charging denial of a set that blocks, a reservation, a sweep due, several policies, a log.
 */

/**
 * Placed before the general path of consume: RETURNs when it decided, else changes nothing
 * (the row stays as read; the general path reads it again).
 */
export const FAST_PATH = `IF n = 1 AND rid IS NULL AND sweep <= 0 AND kinds IN ('f', 't', 's') THEN
  SELECT s.set_kinds, ${NUMS}, coalesce(s.blocked_until_us, 0) INTO stored_kinds, st, bl FROM @S.@T s WHERE s.key = k FOR UPDATE;
  IF FOUND AND stored_kinds = kinds THEN
    ${NOW}    IF bl <= nw THEN
      p := 1; o := 1; ${POLICY}      ch := cost > 0; c := CASE WHEN ch THEN cost ELSE 1 END;
      r := array_fill(0::float8, ARRAY[5]);
${APPLY}      IF ch AND r[2] = 1 THEN
        -- The expiry: the state's (a block in the past ends earlier still).
        UPDATE @S.@T s SET nums = NULL, num1 = st[1], num2 = st[2], num3 = st[3], expires_at_us = ex WHERE s.key = k;
        r[1] := 1;
        RETURN r || mk;
      ELSIF NOT ch OR blocks IS NULL THEN
        r[1] := r[2];
        RETURN r;
      END IF;
    END IF;
  END IF;
END IF;
`;
