/*
 * The consume function's fast path: a charge of one counter policy (token bucket, fixed window,
 * sliding window) on a key whose row exists under the same kinds, with no reservation and no
 * block in force. It is one UPDATE that charges the row only when the charge admits, computed
 * in SQL as algorithms.ts computes it (the same float8 operations, so the same doubles), and
 * answers from the row it wrote. Anything else (no row yet, a denial, a block, a reservation,
 * a peek, several policies, a log, a sweep due) falls through to the general path, which
 * decides from scratch: the UPDATE changed nothing then.
 *
 * The row is locked by the UPDATE itself: two decisions on one key still run one after the
 * other, the second (READ COMMITTED re-evaluation) on the row the first wrote. The database's
 * clock is read as the statement starts, before it waits for that lock; a decision that waited
 * may run on a clock a few µs older than the one before it, which every algorithm takes as the
 * later of the two (window index and arrival time never move back), so it decides no looser.
 *
 * Variables (functions.ts DECLARE): lim, par, c, nw as the general path's; ix, cu, pv, nx the
 * state the UPDATE left; r the reply (NULL: no fast decision).
 */

/** The row's numbers, and the window index a charge now lands in (fixed and sliding windows). */
const ST1 = "s.nums[1]";
const ST2 = "s.nums[2]";
const ST3 = "s.nums[3]";
const INDEX = `greatest(floor(nw / (par * 1000)), ${ST1})`;
/** The current window's count: the stored one when the row's window is the current one. */
const CURRENT = `CASE WHEN ${ST1} >= floor(nw / (par * 1000)) THEN ${ST2} ELSE 0 END`;
/** The previous window's count, as algorithms.ts's `pv`. */
const PREVIOUS = `CASE WHEN ${ST1} >= floor(nw / (par * 1000)) THEN ${ST3} WHEN ${ST1} = ${INDEX} - 1 THEN ${ST2} ELSE 0 END`;
/** The sliding window's budget `bu` (algorithms.ts): the limit less the previous window's weighted count. */
const BUDGET = `lim * par - (${PREVIOUS}) * (par - greatest(0, floor((nw - ${INDEX} * par * 1000) / 1000)))`;
/** The token bucket's arrival time after the charge. */
const ARRIVAL = `greatest(${ST1}, nw) + c * par`;

/** Matches only a row of this single kind with no block in force (a block makes it fall through). */
const ROW = (kind: string): string =>
  `WHERE s.key = k AND s.set_kinds = '${kind}' AND cardinality(s.nums) = ${kind === "t" ? 1 : kind === "f" ? 2 : 3}
    AND coalesce(s.blocked_until_us, 0) <= nw`;

const FIXED = `UPDATE @S.@T s SET nums = ARRAY[${INDEX}, (${CURRENT}) + c], expires_at_us = (${INDEX} + 1) * (par * 1000)
    ${ROW("f")} AND (${CURRENT}) + c <= lim
    RETURNING s.nums[1], s.nums[2] INTO ix, cu;
  IF FOUND THEN
    sz := par * 1000;
    r := ARRAY[1, 1, lim - cu, ceil((ix + 1) * sz / 1000), 0, ix];
  END IF;
`;

const TOKEN = `UPDATE @S.@T s SET nums = ARRAY[${ARRIVAL}], expires_at_us = ${ARRIVAL}
    ${ROW("t")} AND c <= lim AND ${ARRIVAL} - nw <= lim * par
    RETURNING s.nums[1] INTO nx;
  IF FOUND THEN
    r := ARRAY[1, 1, floor((lim * par - (nx - nw)) / par), ceil(nx / 1000), 0, nx];
  END IF;
`;

const SLIDING = `UPDATE @S.@T s SET nums = ARRAY[${INDEX}, (${CURRENT}) + c, ${PREVIOUS}],
    expires_at_us = (${INDEX} * par + 2 * par) * 1000
    ${ROW("s")} AND ((${CURRENT}) + c) * par <= ${BUDGET}
    RETURNING s.nums[1], s.nums[2], s.nums[3] INTO ix, cu, pv;
  IF FOUND THEN
    ws := ix * par;
    bu := lim * par - pv * (par - greatest(0, floor((nw - ws * 1000) / 1000)));
    r := ARRAY[1, 1, greatest(0, floor((bu - cu * par) / par)), ws + 2 * par, 0, ix];
  END IF;
`;

/**
 * The fast path, placed before the general path of consume: answers (and returns) when it
 * decided, else leaves r NULL and the row untouched.
 */
export const FAST_PATH = `IF n = 1 AND rid IS NULL AND cost > 0 AND sweep <= 0 AND kinds IN ('f', 't', 's') THEN
  IF srv THEN nw := floor(extract(epoch FROM clock_timestamp()) * 1000000)::float8; END IF;
  lim := lims[1]; par := pars[1]; c := cost;
  CASE kinds
  WHEN 'f' THEN
  ${FIXED}  WHEN 't' THEN
  ${TOKEN}  ELSE
  ${SLIDING}  END CASE;
  IF r IS NOT NULL THEN RETURN r; END IF;
END IF;
`;
