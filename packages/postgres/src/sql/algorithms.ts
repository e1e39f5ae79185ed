/*
 * The algorithms in PL/pgSQL: each kind's TypeScript `apply`, `refund` and `settle`
 * (packages/core/src/algorithms/) operation for operation, in float8, so the database computes
 * exactly the doubles JavaScript does (every time an integer number of µs, every quantity an
 * integer, divisions and their floor/ceil as in the TypeScript) and every store decides alike.
 *
 * Fragments share the function's variables (declared in functions.ts):
 *   st    float8[]  the key's numbers, every policy's after the one before (1-based)
 *   lg    float8[]  the logs of the log kinds, one after the other, oldest first each
 *   o     int       where this policy's numbers start in st; lo: entries of earlier logs in lg
 *   kd    text      the kind's letter; lim, par: its limit and parameter (as the Redis scripts')
 *   c     float8    the cost; nw: now, µs; ch: whether to charge (apply)
 *   r     float8[]  the result; i: where this policy's four figures start
 *   ex    float8    the state's expiry (µs) the operation leaves; mk: the charge's mark
 *   m     float8    the mark a refund or settle goes into (NULL: into the current state)
 *   tidied boolean   set when a log dropped entries that left its window (then written, even on a peek)
 * Layout in st: token bucket [arrival time]; fixed window [index, count]; sliding window
 * [index, current, previous]; sliding log and concurrency [entries] with the entries in lg.
 */

/** Numbers each kind keeps in `st`. */
export const WIDTH: Readonly<Record<string, number>> = { t: 1, f: 2, s: 3, l: 1, c: 1 };

/** Whether a kind keeps a log in `lg`. */
export const LOGGED = (code: string): boolean => code === "l" || code === "c";

/**
 * A token bucket's expiry (µs): when its bucket is full again (`at`), rounded up to the next whole
 * minute. Every admission moves that time on, and an UPDATE that changes an indexed column (the
 * expiry's index serves the sweep) cannot be made in place as a HOT update: it adds an entry to
 * each index of the table. Rounded, a busy key's expiry changes about once a minute and its other
 * updates stay on the row's page; a row outlives its state by under a minute before a sweep may
 * delete it. The other kinds' expiries already move only with their windows.
 */
export const tokenExpiry = (at: string): string => `ceil((${at}) / 60000000) * 60000000`;

const TOKEN_APPLY = `tat := greatest(st[o], nw);
nx := tat + c * par;
IF c <= lim AND nx - nw <= lim * par THEN
  r[i] := 1; r[i + 3] := 0;
  IF ch THEN
    st[o] := nx; r[i + 1] := floor((lim * par - (nx - nw)) / par); r[i + 2] := ceil(nx / 1000); mk := nx;
  END IF;
ELSE
  r[i] := 0;
  r[i + 3] := CASE WHEN c > lim THEN -1 ELSE ceil((nx - lim * par - nw) / 1000) END;
END IF;
IF NOT (ch AND r[i] = 1) THEN
  r[i + 1] := greatest(0, floor((lim * par - (tat - nw)) / par)); r[i + 2] := ceil(tat / 1000);
END IF;
ex := ${tokenExpiry("nx")};
`;

const FIXED_APPLY = `sz := par * 1000;
ix := greatest(floor(nw / sz), st[o]);
cu := CASE WHEN st[o] = ix THEN st[o + 1] ELSE 0 END;
we := (ix + 1) * sz;
r[i + 2] := ceil(we / 1000);
IF cu + c <= lim THEN
  r[i] := 1; r[i + 3] := 0;
  IF ch THEN st[o] := ix; st[o + 1] := cu + c; r[i + 1] := lim - cu - c; mk := ix; END IF;
ELSE
  r[i] := 0;
  r[i + 3] := CASE WHEN c > lim THEN -1 ELSE ceil((we - nw) / 1000) END;
END IF;
IF NOT (ch AND r[i] = 1) THEN r[i + 1] := greatest(0, lim - cu); END IF;
ex := we;
`;

/** The sliding window's retry time: the TypeScript `slidingRetryMs`, its loops included. */
const SLIDING_RETRY = `IF cu + c <= lim THEN
  e0 := greatest(0, ceil(par - ((lim - cu - c) * par) / pv));
  WHILE pv * (par - e0) + (cu + c) * par > lim * par LOOP e0 := e0 + 1; END LOOP;
  tat := ws + e0;
ELSE
  e0 := greatest(0, ceil(par - ((lim - c) * par) / cu));
  WHILE cu * (par - e0) + c * par > lim * par LOOP e0 := e0 + 1; END LOOP;
  tat := ws + par + e0;
END IF;
r[i + 3] := greatest(1, ceil(tat - nw / 1000));
`;

/** The sliding window's apply (also the charge function's denial, sql/counter.ts). */
export const SLIDING_APPLY = `ix := greatest(floor(nw / (par * 1000)), st[o]);
cu := CASE WHEN st[o] = ix THEN st[o + 1] ELSE 0 END;
pv := CASE WHEN st[o] = ix THEN st[o + 2] WHEN st[o] = ix - 1 THEN st[o + 1] ELSE 0 END;
ws := ix * par;
el := greatest(0, floor((nw - ws * 1000) / 1000));
bu := lim * par - pv * (par - el);
IF (cu + c) * par <= bu THEN
  r[i] := 1; r[i + 3] := 0;
  IF ch THEN
    st[o] := ix; st[o + 1] := cu + c; st[o + 2] := pv;
    r[i + 1] := greatest(0, floor((bu - (cu + c) * par) / par)); r[i + 2] := ws + 2 * par; mk := ix;
  END IF;
ELSE
  r[i] := 0;
  IF c > lim THEN r[i + 3] := -1; ELSE
${SLIDING_RETRY}  END IF;
END IF;
IF NOT (ch AND r[i] = 1) THEN
  r[i + 1] := greatest(0, floor((bu - cu * par) / par));
  r[i + 2] := CASE WHEN cu > 0 THEN ws + 2 * par WHEN pv > 0 THEN ws + par ELSE ceil(nw / 1000) END;
END IF;
ex := (ws + 2 * par) * 1000;
`;

/** Takes this policy's log out of lg into e (cn entries). */
const LOG_OUT = `cn := st[o]::int;
e := lg[lo + 1 : lo + cn];
sz := par * 1000;
`;

/** Puts e back into lg in place of the cn0 entries it was, and moves lo past it. */
const LOG_IN = `lg := lg[1 : lo] || e || lg[lo + cn0 + 1 :];
st[o] := cardinality(e);
lo := lo + cardinality(e);
`;

/** A sliding log (concurrency: of one unit, `cc`); the TypeScript's ring is a plain array here. */
const LOG_APPLY = `${LOG_OUT}cn0 := cn;
cc := CASE WHEN kd = 'c' THEN 1 ELSE c END;
tat := CASE WHEN cn > 0 THEN greatest(nw, e[cn]) ELSE nw END;
d := 0;
WHILE d < cn AND e[d + 1] <= tat - sz LOOP d := d + 1; END LOOP;
IF d > 0 THEN e := e[d + 1 : cn]; cn := cn - d; tidied := true; END IF;
IF cn + cc <= lim THEN
  r[i] := 1; r[i + 3] := 0;
  IF ch THEN
    e := e || array_fill(tat, ARRAY[cc::int]);
    r[i + 1] := lim - cn - cc; r[i + 2] := ceil((tat + sz) / 1000); mk := tat;
  END IF;
ELSE
  r[i] := 0;
  r[i + 3] := CASE WHEN cc > lim THEN -1 ELSE ceil((e[(cn + cc - lim)::int] + sz - nw) / 1000) END;
END IF;
IF NOT (ch AND r[i] = 1) THEN
  r[i + 1] := greatest(0, lim - cn);
  r[i + 2] := CASE WHEN cn > 0 THEN ceil((e[cn] + sz) / 1000) ELSE ceil(nw / 1000) END;
END IF;
ex := tat + sz;
${LOG_IN}`;

/** Every kind's apply, dispatched on kd. */
export const APPLY = `CASE kd
WHEN 't' THEN
${TOKEN_APPLY}WHEN 'f' THEN
${FIXED_APPLY}WHEN 's' THEN
${SLIDING_APPLY}ELSE
${LOG_APPLY}END CASE;
`;

/** Skips this policy's log in lg (operations that leave it alone). */
export const SKIP_LOG = `IF kd IN ('l', 'c') THEN lo := lo + st[o]::int; END IF;
`;

const TOKEN_REFUND = `IF st[o] > nw AND (m IS NULL OR st[o] = m) THEN st[o] := greatest(nw, st[o] - c * par); END IF;
ex := ${tokenExpiry("st[o]")};
`;

const FIXED_REFUND = `sz := par * 1000;
IF st[o] = greatest(floor(nw / sz), st[o]) AND (m IS NULL OR st[o] = m) THEN st[o + 1] := greatest(0, st[o + 1] - c); END IF;
ex := (st[o] + 1) * sz;
`;

const SLIDING_REFUND = `IF m IS NOT NULL THEN
  IF st[o] = m THEN st[o + 1] := greatest(0, st[o + 1] - c);
  ELSIF st[o] = m + 1 THEN st[o + 2] := greatest(0, st[o + 2] - c); END IF;
  ex := (st[o] + 2) * par * 1000;
ELSE
  ix := greatest(floor(nw / (par * 1000)), st[o]);
  cu := CASE WHEN st[o] = ix THEN st[o + 1] ELSE 0 END;
  pv := CASE WHEN st[o] = ix THEN st[o + 2] WHEN st[o] = ix - 1 THEN st[o + 1] ELSE 0 END;
  tat := least(cu, c);
  st[o] := ix; st[o + 1] := cu - tat; st[o + 2] := greatest(0, pv - (c - tat));
  ex := (ix + 2) * par * 1000;
END IF;
`;

/** Removes up to cc entries equal to m, the newest of them first (they are alike). */
const REMOVE_ENTRIES = `d := 0;
FOR q IN REVERSE cn..1 LOOP
  EXIT WHEN d >= cc;
  IF e[q] = m THEN e := e[1 : q - 1] || e[q + 1 :]; d := d + 1; END IF;
END LOOP;
`;

/** The log's expiry once changed: its newest entry's end, or 0 when empty. */
const LOG_EXPIRY = `cn := cardinality(e);
ex := CASE WHEN cn > 0 THEN e[cn] + sz ELSE 0 END;
`;

const LOG_REFUND = `${LOG_OUT}cn0 := cn;
cc := CASE WHEN kd = 'c' AND m IS NOT NULL THEN 1 ELSE c END;
IF m IS NOT NULL THEN
${REMOVE_ENTRIES}ELSE
  e := e[1 : greatest(0, cn - cc)::int];
END IF;
${LOG_EXPIRY}${LOG_IN}`;

/** Every kind's refund of c into the mark m (NULL: into the current state). */
export const REFUND = `CASE kd
WHEN 't' THEN
${TOKEN_REFUND}WHEN 'f' THEN
${FIXED_REFUND}WHEN 's' THEN
${SLIDING_REFUND}ELSE
${LOG_REFUND}END CASE;
`;

const TOKEN_OVER = `nx := least(st[o] + c * par, nw + 2251799813685248);
IF nx > nw AND nx > st[o] THEN st[o] := nx; END IF;
ex := ${tokenExpiry("st[o]")};
`;

const FIXED_OVER = `sz := par * 1000;
IF st[o] = greatest(floor(nw / sz), st[o]) AND st[o] = m THEN st[o + 1] := least(st[o + 1] + c, 2 * lim, 8589934591); END IF;
ex := (st[o] + 1) * sz;
`;

const SLIDING_OVER = `IF st[o] = m THEN st[o + 1] := least(st[o + 1] + c, 9007199254740991);
ELSIF st[o] = m + 1 THEN st[o + 2] := least(st[o + 2] + c, 9007199254740991); END IF;
ex := (st[o] + 2) * par * 1000;
`;

/** `c` more entries of the mark beside its first one, up to 2 × limit entries in all. */
const LOG_OVER = `${LOG_OUT}cn0 := cn;
cc := least(c, 2 * lim - cn);
IF m > nw - sz AND cc > 0 THEN
  d := array_position(e, m);
  IF d IS NOT NULL THEN e := e[1 : d] || array_fill(m, ARRAY[cc::int]) || e[d + 1 :]; END IF;
END IF;
${LOG_EXPIRY}${LOG_IN}`;

/** A concurrency settle: the holder's one unit is no longer in flight, whatever it cost. */
const CONCURRENCY_SETTLE = `${LOG_OUT}cn0 := cn;
cc := 1;
${REMOVE_ENTRIES}${LOG_EXPIRY}${LOG_IN}`;

/**
 * Every kind's settle of a reservation of `es` units charged into the mark m at its true cost
 * `ac`: the difference back into the mark (a refund) or charged into it (an overcharge).
 */
export const SETTLE = `IF kd = 'c' THEN
${CONCURRENCY_SETTLE}ELSIF ac <= es THEN
c := es - ac;
${REFUND}ELSE
c := ac - es;
CASE kd
WHEN 't' THEN
${TOKEN_OVER}WHEN 'f' THEN
${FIXED_OVER}WHEN 's' THEN
${SLIDING_OVER}ELSE
${LOG_OVER}END CASE;
END IF;
`;
