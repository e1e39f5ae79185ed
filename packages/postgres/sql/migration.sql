-- Floodgate PostgreSQL store, schema version 4.
BEGIN;
SELECT pg_advisory_xact_lock(hashtext('floodgate:floodgate.limits'));
CREATE SCHEMA IF NOT EXISTS floodgate;

-- One row per identifier and limiter (key = prefix{identifier}). One counter policy (token
-- bucket, fixed window, sliding window) keeps its numbers in num1..num3, nums NULL; any other set
-- every policy's numbers in nums, the sliding logs' entries in logs. blocked_until_us: the end of
-- a block (NULL: none); expires_at_us, when the row stops mattering (µs since the epoch).
-- fillfactor leaves room for updates in place.
CREATE TABLE IF NOT EXISTS floodgate.limits (
  key text COLLATE "C" PRIMARY KEY,
  set_kinds text NOT NULL,
  nums float8[],
  logs float8[],
  blocked_until_us float8,
  expires_at_us float8 NOT NULL,
  num1 float8,
  num2 float8,
  num3 float8
) WITH (fillfactor = 70);
-- From schema version 1 or 2: the plain columns added, nothing rewritten. Rows keep their numbers
-- in nums, which every function still reads; a charge moves a counter policy's row to num1..num3.
DO $mig$ BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = 'floodgate.limits'::regclass AND attname = 'num1' AND NOT attisdropped) THEN
    ALTER TABLE floodgate.limits ADD COLUMN num1 float8, ADD COLUMN num2 float8, ADD COLUMN num3 float8,
      ALTER COLUMN nums DROP NOT NULL, ALTER COLUMN blocked_until_us DROP NOT NULL, ALTER COLUMN blocked_until_us DROP DEFAULT;
  END IF;
  -- Version 1 and 2's consume (its first argument named k) is replaced by one whose first argument
  -- is named ky: an older version's migration, which would put back functions that do not read
  -- num1..num3, then fails (PostgreSQL refuses to rename an argument) instead of downgrading them.
  IF EXISTS (SELECT 1 FROM pg_proc WHERE oid = to_regprocedure('floodgate.limits_consume(text, text, float8[], float8[], float8[], float8, float8, text, float8, int)')
      AND proargnames[1] = 'k') THEN
    DROP FUNCTION floodgate.limits_consume(text, text, float8[], float8[], float8[], float8, float8, text, float8, int);
  END IF;
END $mig$;
CREATE INDEX IF NOT EXISTS limits_expires_at_us ON floodgate.limits (expires_at_us);

-- Reservations and leases outstanding: per key and id, what was charged and where.
CREATE TABLE IF NOT EXISTS floodgate.limits_ledger (
  key text COLLATE "C" NOT NULL,
  id text COLLATE "C" NOT NULL,
  rec float8[] NOT NULL,
  expires_at_us float8 NOT NULL,
  PRIMARY KEY (key, id)
);
CREATE INDEX IF NOT EXISTS limits_ledger_expires_at_us ON floodgate.limits_ledger (expires_at_us);

CREATE OR REPLACE FUNCTION floodgate.limits_consume(ky text, kinds text, lims float8[], pars float8[], blocks float8[],
  cost float8, nw float8, rid text, ttl float8, sweep int) RETURNS float8[]
LANGUAGE plpgsql AS $fn$
DECLARE
  st float8[]; lg float8[]; e float8[]; r float8[]; marks float8[]; rc float8[]; rc_xp float8;
  found_row boolean; stored_kinds text; bl float8 := 0; xp float8 := 0; ex float8; mk float8; m float8;
  n int; p int; o int; lo int; i int; cn int; cn0 int; d int; q int; nrows int;
  kd text; lim float8; par float8; c float8; cc float8; ch boolean; srv boolean := nw IS NULL;
  tat float8; nx float8; sz float8; ix float8; cu float8; pv float8; we float8; ws float8; el float8; bu float8; e0 float8;
  es float8; ac float8; allowed boolean; expiry float8; bm float8; tidied boolean := false;
  k text := ky;
BEGIN
IF octet_length(k) > 1024 THEN
  k := substr(k, 1, strpos(k, '{') - 1) || '}' || encode(sha256(convert_to(k, 'UTF8')), 'hex');
END IF;
n := length(kinds);
IF n = 1 AND rid IS NULL AND sweep <= 0 AND kinds IN ('f', 't', 's') THEN
  SELECT s.set_kinds, coalesce(s.nums, CASE s.set_kinds WHEN 't' THEN ARRAY[s.num1] WHEN 'f' THEN ARRAY[s.num1, s.num2]
  ELSE ARRAY[s.num1, s.num2, s.num3] END), coalesce(s.blocked_until_us, 0) INTO stored_kinds, st, bl FROM floodgate.limits s WHERE s.key = k FOR UPDATE;
  IF FOUND AND stored_kinds = kinds THEN
    IF srv THEN nw := floor(extract(epoch FROM clock_timestamp()) * 1000000)::float8; END IF;
    IF bl <= nw THEN
      p := 1; o := 1; kd := substr(kinds, p, 1); lim := lims[p]; par := pars[p]; i := 2 + (p - 1) * 4;
      ch := cost > 0; c := CASE WHEN ch THEN cost ELSE 1 END;
      r := array_fill(0::float8, ARRAY[5]);
CASE kd
WHEN 't' THEN
tat := greatest(st[o], nw);
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
ex := ceil((nx) / 60000000) * 60000000;
WHEN 'f' THEN
sz := par * 1000;
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
WHEN 's' THEN
ix := greatest(floor(nw / (par * 1000)), st[o]);
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
IF cu + c <= lim THEN
  e0 := greatest(0, ceil(par - ((lim - cu - c) * par) / pv));
  WHILE pv * (par - e0) + (cu + c) * par > lim * par LOOP e0 := e0 + 1; END LOOP;
  tat := ws + e0;
ELSE
  e0 := greatest(0, ceil(par - ((lim - c) * par) / cu));
  WHILE cu * (par - e0) + c * par > lim * par LOOP e0 := e0 + 1; END LOOP;
  tat := ws + par + e0;
END IF;
r[i + 3] := greatest(1, ceil(tat - nw / 1000));
  END IF;
END IF;
IF NOT (ch AND r[i] = 1) THEN
  r[i + 1] := greatest(0, floor((bu - cu * par) / par));
  r[i + 2] := CASE WHEN cu > 0 THEN ws + 2 * par WHEN pv > 0 THEN ws + par ELSE ceil(nw / 1000) END;
END IF;
ex := (ws + 2 * par) * 1000;
ELSE
cn := st[o]::int;
e := lg[lo + 1 : lo + cn];
sz := par * 1000;
cn0 := cn;
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
lg := lg[1 : lo] || e || lg[lo + cn0 + 1 :];
st[o] := cardinality(e);
lo := lo + cardinality(e);
END CASE;
      IF ch AND r[2] = 1 THEN
        -- The expiry: the state's (a block in the past ends earlier still).
        UPDATE floodgate.limits s SET nums = NULL, num1 = st[1], num2 = st[2], num3 = st[3], expires_at_us = ex WHERE s.key = k;
        r[1] := 1;
        RETURN r || mk;
      ELSIF NOT ch OR blocks IS NULL THEN
        r[1] := r[2];
        RETURN r;
      END IF;
    END IF;
  END IF;
END IF;
LOOP
SELECT s.set_kinds, coalesce(s.nums, CASE s.set_kinds WHEN 't' THEN ARRAY[s.num1] WHEN 'f' THEN ARRAY[s.num1, s.num2]
  ELSE ARRAY[s.num1, s.num2, s.num3] END), coalesce(s.logs, '{}'), coalesce(s.blocked_until_us, 0), s.expires_at_us
  INTO stored_kinds, st, lg, bl, xp FROM floodgate.limits s WHERE s.key = k FOR UPDATE;
found_row := FOUND;
IF NOT found_row OR stored_kinds IS DISTINCT FROM kinds THEN st := array_fill(0::float8, ARRAY[length(kinds) + 2 * (length(kinds) - length(replace(kinds, 's', '')))
  + (length(kinds) - length(replace(kinds, 'f', '')))]); lg := '{}'; xp := 0; bl := 0; END IF;
IF srv THEN nw := floor(extract(epoch FROM clock_timestamp()) * 1000000)::float8; END IF;
r := array_fill(0::float8, ARRAY[1 + 4 * n]);
c := CASE WHEN cost > 0 THEN cost ELSE 1 END;
allowed := true; ch := false;
o := 1; lo := 0;
FOR p IN 1..n LOOP
kd := substr(kinds, p, 1); lim := lims[p]; par := pars[p]; i := 2 + (p - 1) * 4;
CASE kd
WHEN 't' THEN
tat := greatest(st[o], nw);
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
ex := ceil((nx) / 60000000) * 60000000;
WHEN 'f' THEN
sz := par * 1000;
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
WHEN 's' THEN
ix := greatest(floor(nw / (par * 1000)), st[o]);
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
IF cu + c <= lim THEN
  e0 := greatest(0, ceil(par - ((lim - cu - c) * par) / pv));
  WHILE pv * (par - e0) + (cu + c) * par > lim * par LOOP e0 := e0 + 1; END LOOP;
  tat := ws + e0;
ELSE
  e0 := greatest(0, ceil(par - ((lim - c) * par) / cu));
  WHILE cu * (par - e0) + c * par > lim * par LOOP e0 := e0 + 1; END LOOP;
  tat := ws + par + e0;
END IF;
r[i + 3] := greatest(1, ceil(tat - nw / 1000));
  END IF;
END IF;
IF NOT (ch AND r[i] = 1) THEN
  r[i + 1] := greatest(0, floor((bu - cu * par) / par));
  r[i + 2] := CASE WHEN cu > 0 THEN ws + 2 * par WHEN pv > 0 THEN ws + par ELSE ceil(nw / 1000) END;
END IF;
ex := (ws + 2 * par) * 1000;
ELSE
cn := st[o]::int;
e := lg[lo + 1 : lo + cn];
sz := par * 1000;
cn0 := cn;
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
lg := lg[1 : lo] || e || lg[lo + cn0 + 1 :];
st[o] := cardinality(e);
lo := lo + cardinality(e);
END CASE;
IF r[i] = 0 THEN allowed := false; END IF;
o := o + CASE kd WHEN 't' THEN 1 WHEN 'f' THEN 2 WHEN 's' THEN 3 ELSE 1 END;
END LOOP;
r[1] := CASE WHEN allowed THEN 1 ELSE 0 END;
IF bl > nw THEN
r := r[1 : 1 + 4 * n];
r[1] := 0;
FOR p IN 1..n LOOP
  i := 2 + (p - 1) * 4;
  r[i] := 0; r[i + 1] := 0;
  IF r[i + 2] < ceil(bl / 1000) THEN r[i + 2] := ceil(bl / 1000); END IF;
  IF r[i + 3] <> -1 AND r[i + 3] < ceil((bl - nw) / 1000) THEN r[i + 3] := ceil((bl - nw) / 1000); END IF;
END LOOP;
IF tidied AND found_row AND stored_kinds = kinds THEN
  UPDATE floodgate.limits s SET nums = st, logs = nullif(lg, '{}') WHERE s.key = k;
END IF;
  EXIT;
END IF;
IF NOT allowed AND cost > 0 AND blocks IS NOT NULL THEN
  bm := 0;
  FOR p IN 1..n LOOP
    IF r[2 + (p - 1) * 4] = 0 AND blocks[p] > bm THEN bm := blocks[p]; END IF;
  END LOOP;
  IF bm > 0 THEN
    bl := nw + bm * 1000;
    xp := greatest(xp, bl);
r := r[1 : 1 + 4 * n];
r[1] := 0;
FOR p IN 1..n LOOP
  i := 2 + (p - 1) * 4;
  r[i] := 0; r[i + 1] := 0;
  IF r[i + 2] < ceil(bl / 1000) THEN r[i + 2] := ceil(bl / 1000); END IF;
  IF r[i + 3] <> -1 AND r[i + 3] < ceil((bl - nw) / 1000) THEN r[i + 3] := ceil((bl - nw) / 1000); END IF;
END LOOP;
IF found_row THEN
  UPDATE floodgate.limits s SET set_kinds = kinds, nums = CASE WHEN kinds IN ('t', 'f', 's') THEN NULL ELSE st END, logs = nullif(lg, '{}'),
  num1 = CASE WHEN kinds IN ('t', 'f', 's') THEN st[1] END, num2 = CASE WHEN kinds IN ('t', 'f', 's') THEN st[2] END, num3 = CASE WHEN kinds IN ('t', 'f', 's') THEN st[3] END,
  blocked_until_us = nullif(bl, 0), expires_at_us = xp WHERE s.key = k;
  nrows := 1;
ELSE
  INSERT INTO floodgate.limits AS s (key, set_kinds, nums, logs, blocked_until_us, expires_at_us, num1, num2, num3)
    VALUES (k, kinds, CASE WHEN kinds IN ('t', 'f', 's') THEN NULL ELSE st END, nullif(lg, '{}'), nullif(bl, 0), xp,
      CASE WHEN kinds IN ('t', 'f', 's') THEN st[1] END, CASE WHEN kinds IN ('t', 'f', 's') THEN st[2] END, CASE WHEN kinds IN ('t', 'f', 's') THEN st[3] END)
    ON CONFLICT (key) DO NOTHING;
  GET DIAGNOSTICS nrows = ROW_COUNT;
END IF;
    CONTINUE WHEN nrows = 0;
    EXIT;
  END IF;
END IF;
IF NOT allowed OR cost <= 0 THEN
IF tidied AND found_row AND stored_kinds = kinds THEN
  UPDATE floodgate.limits s SET nums = st, logs = nullif(lg, '{}') WHERE s.key = k;
END IF;
  EXIT;
END IF;
ch := true; expiry := 0; marks := '{}';
o := 1; lo := 0;
FOR p IN 1..n LOOP
kd := substr(kinds, p, 1); lim := lims[p]; par := pars[p]; i := 2 + (p - 1) * 4;
CASE kd
WHEN 't' THEN
tat := greatest(st[o], nw);
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
ex := ceil((nx) / 60000000) * 60000000;
WHEN 'f' THEN
sz := par * 1000;
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
WHEN 's' THEN
ix := greatest(floor(nw / (par * 1000)), st[o]);
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
IF cu + c <= lim THEN
  e0 := greatest(0, ceil(par - ((lim - cu - c) * par) / pv));
  WHILE pv * (par - e0) + (cu + c) * par > lim * par LOOP e0 := e0 + 1; END LOOP;
  tat := ws + e0;
ELSE
  e0 := greatest(0, ceil(par - ((lim - c) * par) / cu));
  WHILE cu * (par - e0) + c * par > lim * par LOOP e0 := e0 + 1; END LOOP;
  tat := ws + par + e0;
END IF;
r[i + 3] := greatest(1, ceil(tat - nw / 1000));
  END IF;
END IF;
IF NOT (ch AND r[i] = 1) THEN
  r[i + 1] := greatest(0, floor((bu - cu * par) / par));
  r[i + 2] := CASE WHEN cu > 0 THEN ws + 2 * par WHEN pv > 0 THEN ws + par ELSE ceil(nw / 1000) END;
END IF;
ex := (ws + 2 * par) * 1000;
ELSE
cn := st[o]::int;
e := lg[lo + 1 : lo + cn];
sz := par * 1000;
cn0 := cn;
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
lg := lg[1 : lo] || e || lg[lo + cn0 + 1 :];
st[o] := cardinality(e);
lo := lo + cardinality(e);
END CASE;
expiry := greatest(expiry, ex); marks := marks || mk;
o := o + CASE kd WHEN 't' THEN 1 WHEN 'f' THEN 2 WHEN 's' THEN 3 ELSE 1 END;
END LOOP;
xp := greatest(expiry, bl);
IF rid IS NOT NULL THEN
  INSERT INTO floodgate.limits_ledger (key, id, rec, expires_at_us) VALUES (k, rid, ARRAY[cost] || marks, floor(nw + ttl * 1000))
    ON CONFLICT (key, id) DO NOTHING;
END IF;
IF found_row THEN
  UPDATE floodgate.limits s SET set_kinds = kinds, nums = CASE WHEN kinds IN ('t', 'f', 's') THEN NULL ELSE st END, logs = nullif(lg, '{}'),
  num1 = CASE WHEN kinds IN ('t', 'f', 's') THEN st[1] END, num2 = CASE WHEN kinds IN ('t', 'f', 's') THEN st[2] END, num3 = CASE WHEN kinds IN ('t', 'f', 's') THEN st[3] END,
  blocked_until_us = nullif(bl, 0), expires_at_us = xp WHERE s.key = k;
  nrows := 1;
ELSE
  INSERT INTO floodgate.limits AS s (key, set_kinds, nums, logs, blocked_until_us, expires_at_us, num1, num2, num3)
    VALUES (k, kinds, CASE WHEN kinds IN ('t', 'f', 's') THEN NULL ELSE st END, nullif(lg, '{}'), nullif(bl, 0), xp,
      CASE WHEN kinds IN ('t', 'f', 's') THEN st[1] END, CASE WHEN kinds IN ('t', 'f', 's') THEN st[2] END, CASE WHEN kinds IN ('t', 'f', 's') THEN st[3] END)
    ON CONFLICT (key) DO NOTHING;
  GET DIAGNOSTICS nrows = ROW_COUNT;
END IF;
IF nrows = 0 THEN
  DELETE FROM floodgate.limits_ledger l WHERE l.key = k AND l.id = rid;
  CONTINUE;
END IF;
r := r || marks;
EXIT;
END LOOP;
IF sweep > 0 THEN
DELETE FROM floodgate.limits WHERE key IN (SELECT t.key FROM floodgate.limits t WHERE t.expires_at_us < nw
  ORDER BY t.expires_at_us LIMIT sweep FOR UPDATE SKIP LOCKED);
GET DIAGNOSTICS nrows = ROW_COUNT;
DELETE FROM floodgate.limits_ledger WHERE (key, id) IN (SELECT t.key, t.id FROM floodgate.limits_ledger t WHERE t.expires_at_us < nw
  ORDER BY t.expires_at_us LIMIT sweep FOR UPDATE SKIP LOCKED);
END IF;
RETURN r;
END
$fn$;

CREATE OR REPLACE FUNCTION floodgate.limits_charge_t(ky text, lim float8, par float8, cost float8, nw float8, blocks float8[])
  RETURNS float8[]
LANGUAGE plpgsql AS $fn$
DECLARE r float8[];
BEGIN
  nw := coalesce(nw, floor(extract(epoch FROM clock_timestamp()) * 1000000)::float8);
  INSERT INTO floodgate.limits AS s (key, set_kinds, num1, expires_at_us) SELECT ky, 't', nw + cost * par, ceil((nw + cost * par) / 60000000) * 60000000 WHERE cost <= lim AND (nw + cost * par) - nw <= lim * par
  ON CONFLICT (key) DO UPDATE SET num1 = greatest(s.num1, nw) + cost * par, expires_at_us = ceil((greatest(s.num1, nw) + cost * par) / 60000000) * 60000000
  WHERE s.set_kinds = 't' AND s.nums IS NULL AND (s.blocked_until_us IS NULL OR s.blocked_until_us <= nw)
    AND cost <= lim AND (greatest(s.num1, nw) + cost * par) - nw <= lim * par
  RETURNING ARRAY[1, 1, floor((lim * par - (s.num1 - nw)) / par), ceil(s.num1 / 1000), 0, s.num1]::float8[] INTO r;
  IF r IS NOT NULL THEN RETURN r; END IF;
  SELECT ARRAY[0, 0, greatest(0, floor((lim * par - (greatest(s.num1, nw) - nw)) / par)), ceil(greatest(s.num1, nw) / 1000),
      CASE WHEN cost > lim THEN -1 ELSE ceil(((greatest(s.num1, nw) + cost * par) - lim * par - nw) / 1000) END]::float8[] INTO r
  FROM floodgate.limits s WHERE s.key = ky AND blocks IS NULL
    AND s.set_kinds = 't' AND s.nums IS NULL AND (s.blocked_until_us IS NULL OR s.blocked_until_us <= nw)
    AND NOT (cost <= lim AND (greatest(s.num1, nw) + cost * par) - nw <= lim * par)
  FOR UPDATE OF s;
  IF r IS NOT NULL THEN RETURN r; END IF;
  RETURN floodgate.limits_consume(ky, 't', ARRAY[lim], ARRAY[par], blocks, cost, nw, NULL, 0, 0);
END
$fn$;

CREATE OR REPLACE FUNCTION floodgate.limits_charge_f(ky text, lim float8, par float8, cost float8, nw float8, blocks float8[])
  RETURNS float8[]
LANGUAGE plpgsql AS $fn$
DECLARE r float8[];
BEGIN
  nw := coalesce(nw, floor(extract(epoch FROM clock_timestamp()) * 1000000)::float8);
  INSERT INTO floodgate.limits AS s (key, set_kinds, num1, num2, expires_at_us) SELECT ky, 'f', floor(nw / (par * 1000)), cost, (floor(nw / (par * 1000)) + 1) * (par * 1000) WHERE cost <= lim
  ON CONFLICT (key) DO UPDATE SET num1 = greatest(excluded.num1, s.num1), num2 = CASE WHEN s.num1 >= excluded.num1 THEN s.num2 ELSE 0 END + cost, expires_at_us = (greatest(excluded.num1, s.num1) + 1) * (par * 1000)
  WHERE s.set_kinds = 'f' AND s.nums IS NULL AND (s.blocked_until_us IS NULL OR s.blocked_until_us <= nw)
    AND CASE WHEN s.num1 >= excluded.num1 THEN s.num2 ELSE 0 END + cost <= lim
  RETURNING ARRAY[1, 1, lim - s.num2, ceil(s.expires_at_us / 1000), 0, s.num1]::float8[] INTO r;
  IF r IS NOT NULL THEN RETURN r; END IF;
  SELECT ARRAY[0, 0, greatest(0, lim - CASE WHEN s.num1 >= floor(nw / (par * 1000)) THEN s.num2 ELSE 0 END), ceil((greatest(floor(nw / (par * 1000)), s.num1) + 1) * (par * 1000) / 1000),
      CASE WHEN cost > lim THEN -1 ELSE ceil(((greatest(floor(nw / (par * 1000)), s.num1) + 1) * (par * 1000) - nw) / 1000) END]::float8[] INTO r
  FROM floodgate.limits s WHERE s.key = ky AND blocks IS NULL
    AND s.set_kinds = 'f' AND s.nums IS NULL AND (s.blocked_until_us IS NULL OR s.blocked_until_us <= nw)
    AND NOT (CASE WHEN s.num1 >= floor(nw / (par * 1000)) THEN s.num2 ELSE 0 END + cost <= lim)
  FOR UPDATE OF s;
  IF r IS NOT NULL THEN RETURN r; END IF;
  RETURN floodgate.limits_consume(ky, 'f', ARRAY[lim], ARRAY[par], blocks, cost, nw, NULL, 0, 0);
END
$fn$;

CREATE OR REPLACE FUNCTION floodgate.limits_charge_s(ky text, lim float8, par float8, cost float8, nw float8, blocks float8[])
  RETURNS float8[]
LANGUAGE plpgsql AS $fn$
DECLARE r float8[];
  st float8[]; o int := 1; i int := 2; c float8 := cost; ch boolean := true;
  ix float8; cu float8; pv float8; ws float8; el float8; bu float8; e0 float8; tat float8; mk float8; ex float8;
BEGIN
  nw := coalesce(nw, floor(extract(epoch FROM clock_timestamp()) * 1000000)::float8);
  INSERT INTO floodgate.limits AS s (key, set_kinds, num1, num2, num3, expires_at_us) SELECT ky, 's', floor(nw / (par * 1000)), cost, 0, (floor(nw / (par * 1000)) * par + 2 * par) * 1000 WHERE cost * par <= lim * par
  ON CONFLICT (key) DO UPDATE SET num1 = greatest(excluded.num1, s.num1), num2 = CASE WHEN s.num1 >= excluded.num1 THEN s.num2 ELSE 0 END + cost, num3 = CASE WHEN s.num1 >= excluded.num1 THEN s.num3 WHEN s.num1 = excluded.num1 - 1 THEN s.num2 ELSE 0 END, expires_at_us = (greatest(excluded.num1, s.num1) * par + 2 * par) * 1000
  WHERE s.set_kinds = 's' AND s.nums IS NULL AND (s.blocked_until_us IS NULL OR s.blocked_until_us <= nw)
    AND (CASE WHEN s.num1 >= excluded.num1 THEN s.num2 ELSE 0 END + cost) * par <= (lim * par - (CASE WHEN s.num1 >= excluded.num1 THEN s.num3 WHEN s.num1 = excluded.num1 - 1 THEN s.num2 ELSE 0 END) * (par - greatest(0, floor((nw - greatest(excluded.num1, s.num1) * par * 1000) / 1000))))
  RETURNING ARRAY[1, 1, greatest(0, floor(((lim * par - s.num3 * (par - greatest(0, floor((nw - s.num1 * par * 1000) / 1000)))) - s.num2 * par) / par)), s.num1 * par + 2 * par, 0, s.num1]::float8[] INTO r;
  IF r IS NOT NULL THEN RETURN r; END IF;
  SELECT ARRAY[s.num1, s.num2, s.num3] INTO st FROM floodgate.limits s WHERE s.key = ky AND blocks IS NULL
    AND s.set_kinds = 's' AND s.nums IS NULL AND (s.blocked_until_us IS NULL OR s.blocked_until_us <= nw)
  FOR UPDATE OF s;
  IF st IS NOT NULL THEN
    r := array_fill(0::float8, ARRAY[5]);
ix := greatest(floor(nw / (par * 1000)), st[o]);
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
IF cu + c <= lim THEN
  e0 := greatest(0, ceil(par - ((lim - cu - c) * par) / pv));
  WHILE pv * (par - e0) + (cu + c) * par > lim * par LOOP e0 := e0 + 1; END LOOP;
  tat := ws + e0;
ELSE
  e0 := greatest(0, ceil(par - ((lim - c) * par) / cu));
  WHILE cu * (par - e0) + c * par > lim * par LOOP e0 := e0 + 1; END LOOP;
  tat := ws + par + e0;
END IF;
r[i + 3] := greatest(1, ceil(tat - nw / 1000));
  END IF;
END IF;
IF NOT (ch AND r[i] = 1) THEN
  r[i + 1] := greatest(0, floor((bu - cu * par) / par));
  r[i + 2] := CASE WHEN cu > 0 THEN ws + 2 * par WHEN pv > 0 THEN ws + par ELSE ceil(nw / 1000) END;
END IF;
ex := (ws + 2 * par) * 1000;
    IF r[2] = 0 THEN RETURN r; END IF;
  END IF;
  RETURN floodgate.limits_consume(ky, 's', ARRAY[lim], ARRAY[par], blocks, cost, nw, NULL, 0, 0);
END
$fn$;

CREATE OR REPLACE FUNCTION floodgate.limits_refund(k text, kinds text, lims float8[], pars float8[], cost float8, nw float8,
  mks float8[]) RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
  st float8[]; lg float8[]; e float8[]; r float8[]; marks float8[]; rc float8[]; rc_xp float8;
  found_row boolean; stored_kinds text; bl float8 := 0; xp float8 := 0; ex float8; mk float8; m float8;
  n int; p int; o int; lo int; i int; cn int; cn0 int; d int; q int; nrows int;
  kd text; lim float8; par float8; c float8; cc float8; ch boolean; srv boolean := nw IS NULL;
  tat float8; nx float8; sz float8; ix float8; cu float8; pv float8; we float8; ws float8; el float8; bu float8; e0 float8;
  es float8; ac float8; allowed boolean; expiry float8; bm float8; tidied boolean := false;
BEGIN
IF octet_length(k) > 1024 THEN
  k := substr(k, 1, strpos(k, '{') - 1) || '}' || encode(sha256(convert_to(k, 'UTF8')), 'hex');
END IF;
n := length(kinds);
SELECT s.set_kinds, coalesce(s.nums, CASE s.set_kinds WHEN 't' THEN ARRAY[s.num1] WHEN 'f' THEN ARRAY[s.num1, s.num2]
  ELSE ARRAY[s.num1, s.num2, s.num3] END), coalesce(s.logs, '{}'), coalesce(s.blocked_until_us, 0), s.expires_at_us
  INTO stored_kinds, st, lg, bl, xp FROM floodgate.limits s WHERE s.key = k FOR UPDATE;
found_row := FOUND;
IF NOT found_row OR stored_kinds IS DISTINCT FROM kinds THEN st := array_fill(0::float8, ARRAY[length(kinds) + 2 * (length(kinds) - length(replace(kinds, 's', '')))
  + (length(kinds) - length(replace(kinds, 'f', '')))]); lg := '{}'; xp := 0; bl := 0; END IF;
IF NOT found_row OR stored_kinds IS DISTINCT FROM kinds THEN RETURN; END IF;
IF srv THEN nw := floor(extract(epoch FROM clock_timestamp()) * 1000000)::float8; END IF;
c := cost; expiry := 0;
o := 1; lo := 0;
FOR p IN 1..n LOOP
kd := substr(kinds, p, 1); lim := lims[p]; par := pars[p]; i := 2 + (p - 1) * 4;
m := mks[p]; c := cost;
CASE kd
WHEN 't' THEN
IF st[o] > nw AND (m IS NULL OR st[o] = m) THEN st[o] := greatest(nw, st[o] - c * par); END IF;
ex := ceil((st[o]) / 60000000) * 60000000;
WHEN 'f' THEN
sz := par * 1000;
IF st[o] = greatest(floor(nw / sz), st[o]) AND (m IS NULL OR st[o] = m) THEN st[o + 1] := greatest(0, st[o + 1] - c); END IF;
ex := (st[o] + 1) * sz;
WHEN 's' THEN
IF m IS NOT NULL THEN
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
ELSE
cn := st[o]::int;
e := lg[lo + 1 : lo + cn];
sz := par * 1000;
cn0 := cn;
cc := CASE WHEN kd = 'c' AND m IS NOT NULL THEN 1 ELSE c END;
IF m IS NOT NULL THEN
d := 0;
FOR q IN REVERSE cn..1 LOOP
  EXIT WHEN d >= cc;
  IF e[q] = m THEN e := e[1 : q - 1] || e[q + 1 :]; d := d + 1; END IF;
END LOOP;
ELSE
  e := e[1 : greatest(0, cn - cc)::int];
END IF;
cn := cardinality(e);
ex := CASE WHEN cn > 0 THEN e[cn] + sz ELSE 0 END;
lg := lg[1 : lo] || e || lg[lo + cn0 + 1 :];
st[o] := cardinality(e);
lo := lo + cardinality(e);
END CASE;
expiry := greatest(expiry, ex);
o := o + CASE kd WHEN 't' THEN 1 WHEN 'f' THEN 2 WHEN 's' THEN 3 ELSE 1 END;
END LOOP;
xp := greatest(expiry, bl);
IF found_row THEN
  UPDATE floodgate.limits s SET set_kinds = kinds, nums = CASE WHEN kinds IN ('t', 'f', 's') THEN NULL ELSE st END, logs = nullif(lg, '{}'),
  num1 = CASE WHEN kinds IN ('t', 'f', 's') THEN st[1] END, num2 = CASE WHEN kinds IN ('t', 'f', 's') THEN st[2] END, num3 = CASE WHEN kinds IN ('t', 'f', 's') THEN st[3] END,
  blocked_until_us = nullif(bl, 0), expires_at_us = xp WHERE s.key = k;
  nrows := 1;
ELSE
  INSERT INTO floodgate.limits AS s (key, set_kinds, nums, logs, blocked_until_us, expires_at_us, num1, num2, num3)
    VALUES (k, kinds, CASE WHEN kinds IN ('t', 'f', 's') THEN NULL ELSE st END, nullif(lg, '{}'), nullif(bl, 0), xp,
      CASE WHEN kinds IN ('t', 'f', 's') THEN st[1] END, CASE WHEN kinds IN ('t', 'f', 's') THEN st[2] END, CASE WHEN kinds IN ('t', 'f', 's') THEN st[3] END)
    ON CONFLICT (key) DO NOTHING;
  GET DIAGNOSTICS nrows = ROW_COUNT;
END IF;
END
$fn$;

CREATE OR REPLACE FUNCTION floodgate.limits_settle(k text, kinds text, lims float8[], pars float8[], rid text, act float8,
  nw float8) RETURNS boolean
LANGUAGE plpgsql AS $fn$
DECLARE
  st float8[]; lg float8[]; e float8[]; r float8[]; marks float8[]; rc float8[]; rc_xp float8;
  found_row boolean; stored_kinds text; bl float8 := 0; xp float8 := 0; ex float8; mk float8; m float8;
  n int; p int; o int; lo int; i int; cn int; cn0 int; d int; q int; nrows int;
  kd text; lim float8; par float8; c float8; cc float8; ch boolean; srv boolean := nw IS NULL;
  tat float8; nx float8; sz float8; ix float8; cu float8; pv float8; we float8; ws float8; el float8; bu float8; e0 float8;
  es float8; ac float8; allowed boolean; expiry float8; bm float8; tidied boolean := false;
BEGIN
IF octet_length(k) > 1024 THEN
  k := substr(k, 1, strpos(k, '{') - 1) || '}' || encode(sha256(convert_to(k, 'UTF8')), 'hex');
END IF;
n := length(kinds);
SELECT s.set_kinds, coalesce(s.nums, CASE s.set_kinds WHEN 't' THEN ARRAY[s.num1] WHEN 'f' THEN ARRAY[s.num1, s.num2]
  ELSE ARRAY[s.num1, s.num2, s.num3] END), coalesce(s.logs, '{}'), coalesce(s.blocked_until_us, 0), s.expires_at_us
  INTO stored_kinds, st, lg, bl, xp FROM floodgate.limits s WHERE s.key = k FOR UPDATE;
found_row := FOUND;
IF NOT found_row OR stored_kinds IS DISTINCT FROM kinds THEN st := array_fill(0::float8, ARRAY[length(kinds) + 2 * (length(kinds) - length(replace(kinds, 's', '')))
  + (length(kinds) - length(replace(kinds, 'f', '')))]); lg := '{}'; xp := 0; bl := 0; END IF;
IF srv THEN nw := floor(extract(epoch FROM clock_timestamp()) * 1000000)::float8; END IF;
DELETE FROM floodgate.limits_ledger l WHERE l.key = k AND l.id = rid RETURNING l.rec, l.expires_at_us INTO rc, rc_xp;
IF rc IS NULL OR rc_xp <= nw THEN RETURN false; END IF;
IF NOT found_row OR stored_kinds IS DISTINCT FROM kinds OR cardinality(rc) <> n + 1 THEN RETURN true; END IF;
es := rc[1]; ac := act; expiry := 0;
o := 1; lo := 0;
FOR p IN 1..n LOOP
kd := substr(kinds, p, 1); lim := lims[p]; par := pars[p]; i := 2 + (p - 1) * 4;
m := rc[1 + p];
IF kd = 'c' THEN
cn := st[o]::int;
e := lg[lo + 1 : lo + cn];
sz := par * 1000;
cn0 := cn;
cc := 1;
d := 0;
FOR q IN REVERSE cn..1 LOOP
  EXIT WHEN d >= cc;
  IF e[q] = m THEN e := e[1 : q - 1] || e[q + 1 :]; d := d + 1; END IF;
END LOOP;
cn := cardinality(e);
ex := CASE WHEN cn > 0 THEN e[cn] + sz ELSE 0 END;
lg := lg[1 : lo] || e || lg[lo + cn0 + 1 :];
st[o] := cardinality(e);
lo := lo + cardinality(e);
ELSIF ac <= es THEN
c := es - ac;
CASE kd
WHEN 't' THEN
IF st[o] > nw AND (m IS NULL OR st[o] = m) THEN st[o] := greatest(nw, st[o] - c * par); END IF;
ex := ceil((st[o]) / 60000000) * 60000000;
WHEN 'f' THEN
sz := par * 1000;
IF st[o] = greatest(floor(nw / sz), st[o]) AND (m IS NULL OR st[o] = m) THEN st[o + 1] := greatest(0, st[o + 1] - c); END IF;
ex := (st[o] + 1) * sz;
WHEN 's' THEN
IF m IS NOT NULL THEN
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
ELSE
cn := st[o]::int;
e := lg[lo + 1 : lo + cn];
sz := par * 1000;
cn0 := cn;
cc := CASE WHEN kd = 'c' AND m IS NOT NULL THEN 1 ELSE c END;
IF m IS NOT NULL THEN
d := 0;
FOR q IN REVERSE cn..1 LOOP
  EXIT WHEN d >= cc;
  IF e[q] = m THEN e := e[1 : q - 1] || e[q + 1 :]; d := d + 1; END IF;
END LOOP;
ELSE
  e := e[1 : greatest(0, cn - cc)::int];
END IF;
cn := cardinality(e);
ex := CASE WHEN cn > 0 THEN e[cn] + sz ELSE 0 END;
lg := lg[1 : lo] || e || lg[lo + cn0 + 1 :];
st[o] := cardinality(e);
lo := lo + cardinality(e);
END CASE;
ELSE
c := ac - es;
CASE kd
WHEN 't' THEN
nx := least(st[o] + c * par, nw + 2251799813685248);
IF nx > nw AND nx > st[o] THEN st[o] := nx; END IF;
ex := ceil((st[o]) / 60000000) * 60000000;
WHEN 'f' THEN
sz := par * 1000;
IF st[o] = greatest(floor(nw / sz), st[o]) AND st[o] = m THEN st[o + 1] := least(st[o + 1] + c, 2 * lim, 8589934591); END IF;
ex := (st[o] + 1) * sz;
WHEN 's' THEN
IF st[o] = m THEN st[o + 1] := least(st[o + 1] + c, 9007199254740991);
ELSIF st[o] = m + 1 THEN st[o + 2] := least(st[o + 2] + c, 9007199254740991); END IF;
ex := (st[o] + 2) * par * 1000;
ELSE
cn := st[o]::int;
e := lg[lo + 1 : lo + cn];
sz := par * 1000;
cn0 := cn;
cc := least(c, 2 * lim - cn);
IF m > nw - sz AND cc > 0 THEN
  d := array_position(e, m);
  IF d IS NOT NULL THEN e := e[1 : d] || array_fill(m, ARRAY[cc::int]) || e[d + 1 :]; END IF;
END IF;
cn := cardinality(e);
ex := CASE WHEN cn > 0 THEN e[cn] + sz ELSE 0 END;
lg := lg[1 : lo] || e || lg[lo + cn0 + 1 :];
st[o] := cardinality(e);
lo := lo + cardinality(e);
END CASE;
END IF;
expiry := greatest(expiry, ex);
o := o + CASE kd WHEN 't' THEN 1 WHEN 'f' THEN 2 WHEN 's' THEN 3 ELSE 1 END;
END LOOP;
xp := greatest(expiry, bl);
IF found_row THEN
  UPDATE floodgate.limits s SET set_kinds = kinds, nums = CASE WHEN kinds IN ('t', 'f', 's') THEN NULL ELSE st END, logs = nullif(lg, '{}'),
  num1 = CASE WHEN kinds IN ('t', 'f', 's') THEN st[1] END, num2 = CASE WHEN kinds IN ('t', 'f', 's') THEN st[2] END, num3 = CASE WHEN kinds IN ('t', 'f', 's') THEN st[3] END,
  blocked_until_us = nullif(bl, 0), expires_at_us = xp WHERE s.key = k;
  nrows := 1;
ELSE
  INSERT INTO floodgate.limits AS s (key, set_kinds, nums, logs, blocked_until_us, expires_at_us, num1, num2, num3)
    VALUES (k, kinds, CASE WHEN kinds IN ('t', 'f', 's') THEN NULL ELSE st END, nullif(lg, '{}'), nullif(bl, 0), xp,
      CASE WHEN kinds IN ('t', 'f', 's') THEN st[1] END, CASE WHEN kinds IN ('t', 'f', 's') THEN st[2] END, CASE WHEN kinds IN ('t', 'f', 's') THEN st[3] END)
    ON CONFLICT (key) DO NOTHING;
  GET DIAGNOSTICS nrows = ROW_COUNT;
END IF;
RETURN true;
END
$fn$;

CREATE OR REPLACE FUNCTION floodgate.limits_admin(k text, kinds text, lims float8[], pars float8[], op text, amount float8,
  nw float8) RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
  st float8[]; lg float8[]; e float8[]; r float8[]; marks float8[]; rc float8[]; rc_xp float8;
  found_row boolean; stored_kinds text; bl float8 := 0; xp float8 := 0; ex float8; mk float8; m float8;
  n int; p int; o int; lo int; i int; cn int; cn0 int; d int; q int; nrows int;
  kd text; lim float8; par float8; c float8; cc float8; ch boolean; srv boolean := nw IS NULL;
  tat float8; nx float8; sz float8; ix float8; cu float8; pv float8; we float8; ws float8; el float8; bu float8; e0 float8;
  es float8; ac float8; allowed boolean; expiry float8; bm float8; tidied boolean := false;
BEGIN
IF octet_length(k) > 1024 THEN
  k := substr(k, 1, strpos(k, '{') - 1) || '}' || encode(sha256(convert_to(k, 'UTF8')), 'hex');
END IF;
IF op = 'r' THEN
  -- The ledger stays, as on Redis: a reservation made before the reset still settles (into nothing).
  DELETE FROM floodgate.limits s WHERE s.key = k;
  RETURN;
END IF;
n := length(kinds);
LOOP
SELECT s.set_kinds, coalesce(s.nums, CASE s.set_kinds WHEN 't' THEN ARRAY[s.num1] WHEN 'f' THEN ARRAY[s.num1, s.num2]
  ELSE ARRAY[s.num1, s.num2, s.num3] END), coalesce(s.logs, '{}'), coalesce(s.blocked_until_us, 0), s.expires_at_us
  INTO stored_kinds, st, lg, bl, xp FROM floodgate.limits s WHERE s.key = k FOR UPDATE;
found_row := FOUND;
IF NOT found_row OR stored_kinds IS DISTINCT FROM kinds THEN st := array_fill(0::float8, ARRAY[length(kinds) + 2 * (length(kinds) - length(replace(kinds, 's', '')))
  + (length(kinds) - length(replace(kinds, 'f', '')))]); lg := '{}'; xp := 0; bl := 0; END IF;
IF srv THEN nw := floor(extract(epoch FROM clock_timestamp()) * 1000000)::float8; END IF;
IF op = 'u' THEN
  IF NOT found_row OR bl <= 0 THEN RETURN; END IF;
  bl := 0;
ELSIF op = 'b' THEN
  bl := nw + amount * 1000;
ELSE
  expiry := xp;
  r := array_fill(0::float8, ARRAY[5]);
o := 1; lo := 0;
FOR p IN 1..n LOOP
kd := substr(kinds, p, 1); lim := lims[p]; par := pars[p]; i := 2 + (p - 1) * 4;
c := 1; ch := false; i := 2;
CASE kd
WHEN 't' THEN
tat := greatest(st[o], nw);
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
ex := ceil((nx) / 60000000) * 60000000;
WHEN 'f' THEN
sz := par * 1000;
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
WHEN 's' THEN
ix := greatest(floor(nw / (par * 1000)), st[o]);
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
IF cu + c <= lim THEN
  e0 := greatest(0, ceil(par - ((lim - cu - c) * par) / pv));
  WHILE pv * (par - e0) + (cu + c) * par > lim * par LOOP e0 := e0 + 1; END LOOP;
  tat := ws + e0;
ELSE
  e0 := greatest(0, ceil(par - ((lim - c) * par) / cu));
  WHILE cu * (par - e0) + c * par > lim * par LOOP e0 := e0 + 1; END LOOP;
  tat := ws + par + e0;
END IF;
r[i + 3] := greatest(1, ceil(tat - nw / 1000));
  END IF;
END IF;
IF NOT (ch AND r[i] = 1) THEN
  r[i + 1] := greatest(0, floor((bu - cu * par) / par));
  r[i + 2] := CASE WHEN cu > 0 THEN ws + 2 * par WHEN pv > 0 THEN ws + par ELSE ceil(nw / 1000) END;
END IF;
ex := (ws + 2 * par) * 1000;
ELSE
cn := st[o]::int;
e := lg[lo + 1 : lo + cn];
sz := par * 1000;
cn0 := cn;
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
lg := lg[1 : lo] || e || lg[lo + cn0 + 1 :];
st[o] := cardinality(e);
lo := lo + cardinality(e);
END CASE;
c := least(amount, r[3]);
IF c > 0 THEN
  ch := true;
  IF kd IN ('l', 'c') THEN lo := lo - st[o]::int; END IF;
CASE kd
WHEN 't' THEN
tat := greatest(st[o], nw);
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
ex := ceil((nx) / 60000000) * 60000000;
WHEN 'f' THEN
sz := par * 1000;
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
WHEN 's' THEN
ix := greatest(floor(nw / (par * 1000)), st[o]);
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
IF cu + c <= lim THEN
  e0 := greatest(0, ceil(par - ((lim - cu - c) * par) / pv));
  WHILE pv * (par - e0) + (cu + c) * par > lim * par LOOP e0 := e0 + 1; END LOOP;
  tat := ws + e0;
ELSE
  e0 := greatest(0, ceil(par - ((lim - c) * par) / cu));
  WHILE cu * (par - e0) + c * par > lim * par LOOP e0 := e0 + 1; END LOOP;
  tat := ws + par + e0;
END IF;
r[i + 3] := greatest(1, ceil(tat - nw / 1000));
  END IF;
END IF;
IF NOT (ch AND r[i] = 1) THEN
  r[i + 1] := greatest(0, floor((bu - cu * par) / par));
  r[i + 2] := CASE WHEN cu > 0 THEN ws + 2 * par WHEN pv > 0 THEN ws + par ELSE ceil(nw / 1000) END;
END IF;
ex := (ws + 2 * par) * 1000;
ELSE
cn := st[o]::int;
e := lg[lo + 1 : lo + cn];
sz := par * 1000;
cn0 := cn;
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
lg := lg[1 : lo] || e || lg[lo + cn0 + 1 :];
st[o] := cardinality(e);
lo := lo + cardinality(e);
END CASE;
expiry := greatest(expiry, ex);
END IF;
o := o + CASE kd WHEN 't' THEN 1 WHEN 'f' THEN 2 WHEN 's' THEN 3 ELSE 1 END;
END LOOP;
  xp := expiry;
END IF;
xp := greatest(xp, bl);
IF found_row THEN
  UPDATE floodgate.limits s SET set_kinds = kinds, nums = CASE WHEN kinds IN ('t', 'f', 's') THEN NULL ELSE st END, logs = nullif(lg, '{}'),
  num1 = CASE WHEN kinds IN ('t', 'f', 's') THEN st[1] END, num2 = CASE WHEN kinds IN ('t', 'f', 's') THEN st[2] END, num3 = CASE WHEN kinds IN ('t', 'f', 's') THEN st[3] END,
  blocked_until_us = nullif(bl, 0), expires_at_us = xp WHERE s.key = k;
  nrows := 1;
ELSE
  INSERT INTO floodgate.limits AS s (key, set_kinds, nums, logs, blocked_until_us, expires_at_us, num1, num2, num3)
    VALUES (k, kinds, CASE WHEN kinds IN ('t', 'f', 's') THEN NULL ELSE st END, nullif(lg, '{}'), nullif(bl, 0), xp,
      CASE WHEN kinds IN ('t', 'f', 's') THEN st[1] END, CASE WHEN kinds IN ('t', 'f', 's') THEN st[2] END, CASE WHEN kinds IN ('t', 'f', 's') THEN st[3] END)
    ON CONFLICT (key) DO NOTHING;
  GET DIAGNOSTICS nrows = ROW_COUNT;
END IF;
EXIT WHEN nrows > 0;
END LOOP;
END
$fn$;

CREATE OR REPLACE FUNCTION floodgate.limits_sweep(sweep int, nw float8) RETURNS int
LANGUAGE plpgsql AS $fn$
DECLARE nrows int;
BEGIN
IF nw IS NULL THEN nw := floor(extract(epoch FROM clock_timestamp()) * 1000000)::float8; END IF;
DELETE FROM floodgate.limits WHERE key IN (SELECT t.key FROM floodgate.limits t WHERE t.expires_at_us < nw
  ORDER BY t.expires_at_us LIMIT sweep FOR UPDATE SKIP LOCKED);
GET DIAGNOSTICS nrows = ROW_COUNT;
DELETE FROM floodgate.limits_ledger WHERE (key, id) IN (SELECT t.key, t.id FROM floodgate.limits_ledger t WHERE t.expires_at_us < nw
  ORDER BY t.expires_at_us LIMIT sweep FOR UPDATE SKIP LOCKED);
RETURN nrows;
END
$fn$;

CREATE OR REPLACE FUNCTION floodgate.limits_lease(k text, kinds text, lims float8[], pars float8[], req float8, want float8,
  life float8, minlife float8, lid text, ret_ids text[], ret_unspent float8[], nw float8) RETURNS float8[]
LANGUAGE plpgsql AS $fn$
DECLARE
  st float8[]; lg float8[]; e float8[]; r float8[]; marks float8[]; rc float8[]; rc_xp float8;
  found_row boolean; stored_kinds text; bl float8 := 0; xp float8 := 0; ex float8; mk float8; m float8;
  n int; p int; o int; lo int; i int; cn int; cn0 int; d int; q int; nrows int;
  kd text; lim float8; par float8; c float8; cc float8; ch boolean; srv boolean := nw IS NULL;
  tat float8; nx float8; sz float8; ix float8; cu float8; pv float8; we float8; ws float8; el float8; bu float8; e0 float8;
  es float8; ac float8; allowed boolean; expiry float8; bm float8; tidied boolean := false;
  rn int; g float8; wend float8; rest float8; saved float8[];
BEGIN
IF octet_length(k) > 1024 THEN
  k := substr(k, 1, strpos(k, '{') - 1) || '}' || encode(sha256(convert_to(k, 'UTF8')), 'hex');
END IF;
n := length(kinds); rn := 1 + 5 * n + 3;
-- The row first (a blank one for a new key), locked: returns and charges then write it in place.
LOOP
SELECT s.set_kinds, coalesce(s.nums, CASE s.set_kinds WHEN 't' THEN ARRAY[s.num1] WHEN 'f' THEN ARRAY[s.num1, s.num2]
  ELSE ARRAY[s.num1, s.num2, s.num3] END), coalesce(s.logs, '{}'), coalesce(s.blocked_until_us, 0), s.expires_at_us
  INTO stored_kinds, st, lg, bl, xp FROM floodgate.limits s WHERE s.key = k FOR UPDATE;
found_row := FOUND;
IF NOT found_row OR stored_kinds IS DISTINCT FROM kinds THEN st := array_fill(0::float8, ARRAY[length(kinds) + 2 * (length(kinds) - length(replace(kinds, 's', '')))
  + (length(kinds) - length(replace(kinds, 'f', '')))]); lg := '{}'; xp := 0; bl := 0; END IF;
  EXIT WHEN found_row;
  INSERT INTO floodgate.limits (key, set_kinds, nums, logs, blocked_until_us, expires_at_us) VALUES (k, kinds, array_fill(0::float8, ARRAY[length(kinds) + 2 * (length(kinds) - length(replace(kinds, 's', '')))
  + (length(kinds) - length(replace(kinds, 'f', '')))]), NULL, 0, 0)
    ON CONFLICT (key) DO NOTHING;
END LOOP;
IF srv THEN nw := floor(extract(epoch FROM clock_timestamp()) * 1000000)::float8; END IF;
SELECT l.rec INTO rc FROM floodgate.limits_ledger l WHERE l.key = k AND l.id = lid AND l.expires_at_us > nw;
IF rc IS NOT NULL THEN
  rc[rn - 1] := greatest(0, rc[rn - 1] - nw); rc[rn] := nw;
  RETURN rc;
END IF;
FOR q IN 1..coalesce(cardinality(ret_ids), 0) LOOP
  rc := NULL;
  DELETE FROM floodgate.limits_ledger l WHERE l.key = k AND l.id = ret_ids[q] RETURNING l.rec, l.expires_at_us INTO rc, rc_xp;
  IF rc IS NOT NULL AND rc_xp > nw AND cardinality(rc) = rn THEN
    c := least(ret_unspent[q], rc[rn - 2]);
    IF c > 0 THEN
o := 1; lo := 0;
FOR p IN 1..n LOOP
kd := substr(kinds, p, 1); lim := lims[p]; par := pars[p]; i := 2 + (p - 1) * 4;
m := rc[1 + 4 * n + p];
CASE kd
WHEN 't' THEN
IF st[o] > nw AND (m IS NULL OR st[o] = m) THEN st[o] := greatest(nw, st[o] - c * par); END IF;
ex := ceil((st[o]) / 60000000) * 60000000;
WHEN 'f' THEN
sz := par * 1000;
IF st[o] = greatest(floor(nw / sz), st[o]) AND (m IS NULL OR st[o] = m) THEN st[o + 1] := greatest(0, st[o + 1] - c); END IF;
ex := (st[o] + 1) * sz;
WHEN 's' THEN
IF m IS NOT NULL THEN
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
ELSE
cn := st[o]::int;
e := lg[lo + 1 : lo + cn];
sz := par * 1000;
cn0 := cn;
cc := CASE WHEN kd = 'c' AND m IS NOT NULL THEN 1 ELSE c END;
IF m IS NOT NULL THEN
d := 0;
FOR q IN REVERSE cn..1 LOOP
  EXIT WHEN d >= cc;
  IF e[q] = m THEN e := e[1 : q - 1] || e[q + 1 :]; d := d + 1; END IF;
END LOOP;
ELSE
  e := e[1 : greatest(0, cn - cc)::int];
END IF;
cn := cardinality(e);
ex := CASE WHEN cn > 0 THEN e[cn] + sz ELSE 0 END;
lg := lg[1 : lo] || e || lg[lo + cn0 + 1 :];
st[o] := cardinality(e);
lo := lo + cardinality(e);
END CASE;
o := o + CASE kd WHEN 't' THEN 1 WHEN 'f' THEN 2 WHEN 's' THEN 3 ELSE 1 END;
END LOOP;
    END IF;
  END IF;
END LOOP;
c := CASE WHEN req > 0 THEN req ELSE 1 END;
r := array_fill(0::float8, ARRAY[1 + 4 * n]); allowed := true; ch := false;
o := 1; lo := 0;
FOR p IN 1..n LOOP
kd := substr(kinds, p, 1); lim := lims[p]; par := pars[p]; i := 2 + (p - 1) * 4;
CASE kd
WHEN 't' THEN
tat := greatest(st[o], nw);
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
ex := ceil((nx) / 60000000) * 60000000;
WHEN 'f' THEN
sz := par * 1000;
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
WHEN 's' THEN
ix := greatest(floor(nw / (par * 1000)), st[o]);
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
IF cu + c <= lim THEN
  e0 := greatest(0, ceil(par - ((lim - cu - c) * par) / pv));
  WHILE pv * (par - e0) + (cu + c) * par > lim * par LOOP e0 := e0 + 1; END LOOP;
  tat := ws + e0;
ELSE
  e0 := greatest(0, ceil(par - ((lim - c) * par) / cu));
  WHILE cu * (par - e0) + c * par > lim * par LOOP e0 := e0 + 1; END LOOP;
  tat := ws + par + e0;
END IF;
r[i + 3] := greatest(1, ceil(tat - nw / 1000));
  END IF;
END IF;
IF NOT (ch AND r[i] = 1) THEN
  r[i + 1] := greatest(0, floor((bu - cu * par) / par));
  r[i + 2] := CASE WHEN cu > 0 THEN ws + 2 * par WHEN pv > 0 THEN ws + par ELSE ceil(nw / 1000) END;
END IF;
ex := (ws + 2 * par) * 1000;
ELSE
cn := st[o]::int;
e := lg[lo + 1 : lo + cn];
sz := par * 1000;
cn0 := cn;
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
lg := lg[1 : lo] || e || lg[lo + cn0 + 1 :];
st[o] := cardinality(e);
lo := lo + cardinality(e);
END CASE;
IF r[i] = 0 THEN allowed := false; END IF;
o := o + CASE kd WHEN 't' THEN 1 WHEN 'f' THEN 2 WHEN 's' THEN 3 ELSE 1 END;
END LOOP;
r[1] := CASE WHEN allowed THEN 1 ELSE 0 END;
-- A blocked key: denied as a consume is, nothing charged, no lease.
IF bl > nw THEN
r := r[1 : 1 + 4 * n];
r[1] := 0;
FOR p IN 1..n LOOP
  i := 2 + (p - 1) * 4;
  r[i] := 0; r[i + 1] := 0;
  IF r[i + 2] < ceil(bl / 1000) THEN r[i + 2] := ceil(bl / 1000); END IF;
  IF r[i + 3] <> -1 AND r[i + 3] < ceil((bl - nw) / 1000) THEN r[i + 3] := ceil((bl - nw) / 1000); END IF;
END LOOP;
  allowed := false;
END IF;
g := 0; marks := '{}';
IF allowed THEN
  g := want; wend := nw + life;
  FOR p IN 1..n LOOP
kd := substr(kinds, p, 1); lim := lims[p]; par := pars[p]; i := 2 + (p - 1) * 4;
    rest := r[p * 4 - 1] - req;
    IF rest < greatest(ceil(lim / 100), 2 * c) THEN g := 0; ELSE g := least(g, floor(rest / 2)); END IF;
    IF kd <> 't' THEN wend := least(wend, (floor(nw / (par * 1000)) + 1) * par * 1000); END IF;
  END LOOP;
  -- What was wanted is for a whole lease life: a lease cut short by a window's end gets its share.
  IF wend - nw < life THEN g := least(g, floor(want * (wend - nw) / life)); END IF;
  IF wend - nw < minlife THEN g := 0; END IF;
  IF g > 0 THEN
    saved := r;
    c := req + g;
r := array_fill(0::float8, ARRAY[1 + 4 * n]); allowed := true; ch := false;
o := 1; lo := 0;
FOR p IN 1..n LOOP
kd := substr(kinds, p, 1); lim := lims[p]; par := pars[p]; i := 2 + (p - 1) * 4;
IF kd = 't' THEN
tat := greatest(st[o], nw) + req * par;
IF tat < wend THEN tat := wend; END IF;
nx := tat + g * par;
IF c <= lim AND nx - nw <= lim * par THEN
  r[i] := 1; r[i + 3] := 0;
  IF ch THEN
    st[o] := nx; r[i + 1] := floor((lim * par - (nx - nw)) / par); r[i + 2] := ceil(nx / 1000); mk := nx;
  END IF;
ELSE
  r[i] := 0; r[i + 3] := 0;
END IF;
IF NOT (ch AND r[i] = 1) THEN
  r[i + 1] := greatest(0, floor((lim * par - (tat - nw)) / par)); r[i + 2] := ceil(tat / 1000);
END IF;
ex := ceil((nx) / 60000000) * 60000000;
ELSE
CASE kd
WHEN 't' THEN
tat := greatest(st[o], nw);
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
ex := ceil((nx) / 60000000) * 60000000;
WHEN 'f' THEN
sz := par * 1000;
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
WHEN 's' THEN
ix := greatest(floor(nw / (par * 1000)), st[o]);
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
IF cu + c <= lim THEN
  e0 := greatest(0, ceil(par - ((lim - cu - c) * par) / pv));
  WHILE pv * (par - e0) + (cu + c) * par > lim * par LOOP e0 := e0 + 1; END LOOP;
  tat := ws + e0;
ELSE
  e0 := greatest(0, ceil(par - ((lim - c) * par) / cu));
  WHILE cu * (par - e0) + c * par > lim * par LOOP e0 := e0 + 1; END LOOP;
  tat := ws + par + e0;
END IF;
r[i + 3] := greatest(1, ceil(tat - nw / 1000));
  END IF;
END IF;
IF NOT (ch AND r[i] = 1) THEN
  r[i + 1] := greatest(0, floor((bu - cu * par) / par));
  r[i + 2] := CASE WHEN cu > 0 THEN ws + 2 * par WHEN pv > 0 THEN ws + par ELSE ceil(nw / 1000) END;
END IF;
ex := (ws + 2 * par) * 1000;
ELSE
cn := st[o]::int;
e := lg[lo + 1 : lo + cn];
sz := par * 1000;
cn0 := cn;
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
lg := lg[1 : lo] || e || lg[lo + cn0 + 1 :];
st[o] := cardinality(e);
lo := lo + cardinality(e);
END CASE;
END IF;
IF r[i] = 0 THEN allowed := false; END IF;
o := o + CASE kd WHEN 't' THEN 1 WHEN 'f' THEN 2 WHEN 's' THEN 3 ELSE 1 END;
END LOOP;
r[1] := CASE WHEN allowed THEN 1 ELSE 0 END;
    IF allowed THEN
ch := true; marks := '{}'; expiry := 0;
o := 1; lo := 0;
FOR p IN 1..n LOOP
kd := substr(kinds, p, 1); lim := lims[p]; par := pars[p]; i := 2 + (p - 1) * 4;
IF kd = 't' THEN
tat := greatest(st[o], nw) + req * par;
IF tat < wend THEN tat := wend; END IF;
nx := tat + g * par;
IF c <= lim AND nx - nw <= lim * par THEN
  r[i] := 1; r[i + 3] := 0;
  IF ch THEN
    st[o] := nx; r[i + 1] := floor((lim * par - (nx - nw)) / par); r[i + 2] := ceil(nx / 1000); mk := nx;
  END IF;
ELSE
  r[i] := 0; r[i + 3] := 0;
END IF;
IF NOT (ch AND r[i] = 1) THEN
  r[i + 1] := greatest(0, floor((lim * par - (tat - nw)) / par)); r[i + 2] := ceil(tat / 1000);
END IF;
ex := ceil((nx) / 60000000) * 60000000;
ELSE
CASE kd
WHEN 't' THEN
tat := greatest(st[o], nw);
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
ex := ceil((nx) / 60000000) * 60000000;
WHEN 'f' THEN
sz := par * 1000;
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
WHEN 's' THEN
ix := greatest(floor(nw / (par * 1000)), st[o]);
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
IF cu + c <= lim THEN
  e0 := greatest(0, ceil(par - ((lim - cu - c) * par) / pv));
  WHILE pv * (par - e0) + (cu + c) * par > lim * par LOOP e0 := e0 + 1; END LOOP;
  tat := ws + e0;
ELSE
  e0 := greatest(0, ceil(par - ((lim - c) * par) / cu));
  WHILE cu * (par - e0) + c * par > lim * par LOOP e0 := e0 + 1; END LOOP;
  tat := ws + par + e0;
END IF;
r[i + 3] := greatest(1, ceil(tat - nw / 1000));
  END IF;
END IF;
IF NOT (ch AND r[i] = 1) THEN
  r[i + 1] := greatest(0, floor((bu - cu * par) / par));
  r[i + 2] := CASE WHEN cu > 0 THEN ws + 2 * par WHEN pv > 0 THEN ws + par ELSE ceil(nw / 1000) END;
END IF;
ex := (ws + 2 * par) * 1000;
ELSE
cn := st[o]::int;
e := lg[lo + 1 : lo + cn];
sz := par * 1000;
cn0 := cn;
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
lg := lg[1 : lo] || e || lg[lo + cn0 + 1 :];
st[o] := cardinality(e);
lo := lo + cardinality(e);
END CASE;
END IF;
marks := marks || mk; expiry := greatest(expiry, ex);
o := o + CASE kd WHEN 't' THEN 1 WHEN 'f' THEN 2 WHEN 's' THEN 3 ELSE 1 END;
END LOOP;
xp := greatest(xp, expiry);
    ELSE
      g := 0; r := saved;
    END IF;
  END IF;
  IF g = 0 AND req > 0 THEN
    c := req;
ch := true; marks := '{}'; expiry := 0;
o := 1; lo := 0;
FOR p IN 1..n LOOP
kd := substr(kinds, p, 1); lim := lims[p]; par := pars[p]; i := 2 + (p - 1) * 4;
CASE kd
WHEN 't' THEN
tat := greatest(st[o], nw);
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
ex := ceil((nx) / 60000000) * 60000000;
WHEN 'f' THEN
sz := par * 1000;
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
WHEN 's' THEN
ix := greatest(floor(nw / (par * 1000)), st[o]);
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
IF cu + c <= lim THEN
  e0 := greatest(0, ceil(par - ((lim - cu - c) * par) / pv));
  WHILE pv * (par - e0) + (cu + c) * par > lim * par LOOP e0 := e0 + 1; END LOOP;
  tat := ws + e0;
ELSE
  e0 := greatest(0, ceil(par - ((lim - c) * par) / cu));
  WHILE cu * (par - e0) + c * par > lim * par LOOP e0 := e0 + 1; END LOOP;
  tat := ws + par + e0;
END IF;
r[i + 3] := greatest(1, ceil(tat - nw / 1000));
  END IF;
END IF;
IF NOT (ch AND r[i] = 1) THEN
  r[i + 1] := greatest(0, floor((bu - cu * par) / par));
  r[i + 2] := CASE WHEN cu > 0 THEN ws + 2 * par WHEN pv > 0 THEN ws + par ELSE ceil(nw / 1000) END;
END IF;
ex := (ws + 2 * par) * 1000;
ELSE
cn := st[o]::int;
e := lg[lo + 1 : lo + cn];
sz := par * 1000;
cn0 := cn;
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
lg := lg[1 : lo] || e || lg[lo + cn0 + 1 :];
st[o] := cardinality(e);
lo := lo + cardinality(e);
END CASE;
marks := marks || mk; expiry := greatest(expiry, ex);
o := o + CASE kd WHEN 't' THEN 1 WHEN 'f' THEN 2 WHEN 's' THEN 3 ELSE 1 END;
END LOOP;
xp := greatest(xp, expiry);
  END IF;
  life := wend - nw;
END IF;
IF req = 0 THEN r[1] := CASE WHEN g > 0 THEN 1 ELSE 0 END; END IF;
IF cardinality(marks) = n AND NOT (g = 0 AND req = 0) AND r[1] = 1 THEN r := r || marks;
ELSE r := r || array_fill(0::float8, ARRAY[n]); END IF;
r := r || ARRAY[g, CASE WHEN g > 0 THEN life ELSE 0 END, nw];
IF g > 0 THEN
  rc := r; rc[rn - 1] := nw + life;
  INSERT INTO floodgate.limits_ledger (key, id, rec, expires_at_us) VALUES (k, lid, rc, nw + (ceil(life / 1000) + 10000) * 1000)
    ON CONFLICT (key, id) DO NOTHING;
END IF;
UPDATE floodgate.limits s SET set_kinds = kinds, nums = CASE WHEN kinds IN ('t', 'f', 's') THEN NULL ELSE st END, logs = nullif(lg, '{}'),
  num1 = CASE WHEN kinds IN ('t', 'f', 's') THEN st[1] END, num2 = CASE WHEN kinds IN ('t', 'f', 's') THEN st[2] END, num3 = CASE WHEN kinds IN ('t', 'f', 's') THEN st[3] END,
  blocked_until_us = nullif(bl, 0), expires_at_us = xp WHERE s.key = k;
RETURN r;
END
$fn$;

CREATE OR REPLACE FUNCTION floodgate.limits_consume_many(ks text[], kss text[], lims_all float8[], pars_all float8[],
  blocks_all float8[], cost float8, nw float8) RETURNS float8[]
LANGUAGE plpgsql AS $fn$
DECLARE
  st float8[]; lg float8[]; e float8[]; r float8[]; marks float8[]; rc float8[]; rc_xp float8;
  found_row boolean; stored_kinds text; bl float8 := 0; xp float8 := 0; ex float8; mk float8; m float8;
  n int; p int; o int; lo int; i int; cn int; cn0 int; d int; q int; nrows int;
  kd text; lim float8; par float8; c float8; cc float8; ch boolean; srv boolean := nw IS NULL;
  tat float8; nx float8; sz float8; ix float8; cu float8; pv float8; we float8; ws float8; el float8; bu float8; e0 float8;
  es float8; ac float8; allowed boolean; expiry float8; bm float8; tidied boolean := false;
  k text; kinds text; lims float8[]; pars float8[]; blocks float8[];
  hk text[] := '{}'; made text[] := '{}'; res float8[]; all_ok boolean := true; j int; po int; np int := cardinality(ks);
  skd text[]; sts text[]; lgs text[]; bls float8[]; xps float8[]; nst text[]; nlg text[]; nbl float8[]; nxp float8[];
BEGIN
FOR j IN 1..np LOOP
  k := ks[j];
IF octet_length(k) > 1024 THEN
  k := substr(k, 1, strpos(k, '{') - 1) || '}' || encode(sha256(convert_to(k, 'UTF8')), 'hex');
END IF;
  hk := hk || k;
END LOOP;
FOR j IN SELECT u.o::int FROM unnest(hk) WITH ORDINALITY AS u(x, o) ORDER BY u.x COLLATE "C" LOOP
  k := hk[j];
  LOOP
    SELECT s.set_kinds, coalesce(s.nums, CASE s.set_kinds WHEN 't' THEN ARRAY[s.num1] WHEN 'f' THEN ARRAY[s.num1, s.num2]
  ELSE ARRAY[s.num1, s.num2, s.num3] END), coalesce(s.logs, '{}'), coalesce(s.blocked_until_us, 0), s.expires_at_us
      INTO stored_kinds, st, lg, bl, xp FROM floodgate.limits s WHERE s.key = k FOR UPDATE;
    EXIT WHEN FOUND;
    INSERT INTO floodgate.limits (key, set_kinds, nums, expires_at_us) VALUES (k, '', '{}', 0) ON CONFLICT (key) DO NOTHING;
    GET DIAGNOSTICS nrows = ROW_COUNT;
    IF nrows > 0 THEN
      made := made || k; stored_kinds := ''; st := '{}'; lg := '{}'; bl := 0; xp := 0;
      EXIT;
    END IF;
  END LOOP;
  skd[j] := stored_kinds; sts[j] := st::text; lgs[j] := lg::text; bls[j] := bl; xps[j] := xp;
END LOOP;
IF srv THEN nw := floor(extract(epoch FROM clock_timestamp()) * 1000000)::float8; END IF;
-- Every pair charged on its state, nothing written yet: the common case, every pair admitted.
po := 0; res := ARRAY[1]::float8[];
IF cost <= 0 THEN all_ok := false; END IF;
FOR j IN 1..np LOOP
  EXIT WHEN NOT all_ok;
k := hk[j]; kinds := kss[j]; n := length(kinds);
lims := lims_all[po + 1 : po + n]; pars := pars_all[po + 1 : po + n];
blocks := CASE WHEN blocks_all IS NULL THEN NULL ELSE blocks_all[po + 1 : po + n] END;
tidied := false;
stored_kinds := skd[j]; st := sts[j]::float8[]; lg := lgs[j]::float8[]; bl := bls[j]; xp := xps[j]; found_row := true;
IF stored_kinds IS DISTINCT FROM kinds THEN st := array_fill(0::float8, ARRAY[length(kinds) + 2 * (length(kinds) - length(replace(kinds, 's', '')))
  + (length(kinds) - length(replace(kinds, 'f', '')))]); lg := '{}'; xp := 0; bl := 0; END IF;
  r := array_fill(0::float8, ARRAY[1 + 4 * n]);
  c := cost; ch := true; expiry := 0; marks := '{}';
o := 1; lo := 0;
FOR p IN 1..n LOOP
kd := substr(kinds, p, 1); lim := lims[p]; par := pars[p]; i := 2 + (p - 1) * 4;
CASE kd
WHEN 't' THEN
tat := greatest(st[o], nw);
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
ex := ceil((nx) / 60000000) * 60000000;
WHEN 'f' THEN
sz := par * 1000;
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
WHEN 's' THEN
ix := greatest(floor(nw / (par * 1000)), st[o]);
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
IF cu + c <= lim THEN
  e0 := greatest(0, ceil(par - ((lim - cu - c) * par) / pv));
  WHILE pv * (par - e0) + (cu + c) * par > lim * par LOOP e0 := e0 + 1; END LOOP;
  tat := ws + e0;
ELSE
  e0 := greatest(0, ceil(par - ((lim - c) * par) / cu));
  WHILE cu * (par - e0) + c * par > lim * par LOOP e0 := e0 + 1; END LOOP;
  tat := ws + par + e0;
END IF;
r[i + 3] := greatest(1, ceil(tat - nw / 1000));
  END IF;
END IF;
IF NOT (ch AND r[i] = 1) THEN
  r[i + 1] := greatest(0, floor((bu - cu * par) / par));
  r[i + 2] := CASE WHEN cu > 0 THEN ws + 2 * par WHEN pv > 0 THEN ws + par ELSE ceil(nw / 1000) END;
END IF;
ex := (ws + 2 * par) * 1000;
ELSE
cn := st[o]::int;
e := lg[lo + 1 : lo + cn];
sz := par * 1000;
cn0 := cn;
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
lg := lg[1 : lo] || e || lg[lo + cn0 + 1 :];
st[o] := cardinality(e);
lo := lo + cardinality(e);
END CASE;
IF r[i] = 0 THEN all_ok := false; END IF;
expiry := greatest(expiry, ex); marks := marks || mk;
o := o + CASE kd WHEN 't' THEN 1 WHEN 'f' THEN 2 WHEN 's' THEN 3 ELSE 1 END;
END LOOP;
  IF bl > nw THEN all_ok := false; END IF;
  r[1] := 1;
  res := res || r || marks;
  nst[j] := st::text; nlg[j] := lg::text; nbl[j] := bl; nxp[j] := greatest(expiry, bl);
  po := po + n;
END LOOP;
IF all_ok THEN
  FOR j IN 1..np LOOP
    k := hk[j]; kinds := kss[j]; st := nst[j]::float8[]; lg := nlg[j]::float8[]; bl := nbl[j]; xp := nxp[j]; found_row := true;
IF found_row THEN
  UPDATE floodgate.limits s SET set_kinds = kinds, nums = CASE WHEN kinds IN ('t', 'f', 's') THEN NULL ELSE st END, logs = nullif(lg, '{}'),
  num1 = CASE WHEN kinds IN ('t', 'f', 's') THEN st[1] END, num2 = CASE WHEN kinds IN ('t', 'f', 's') THEN st[2] END, num3 = CASE WHEN kinds IN ('t', 'f', 's') THEN st[3] END,
  blocked_until_us = nullif(bl, 0), expires_at_us = xp WHERE s.key = k;
  nrows := 1;
ELSE
  INSERT INTO floodgate.limits AS s (key, set_kinds, nums, logs, blocked_until_us, expires_at_us, num1, num2, num3)
    VALUES (k, kinds, CASE WHEN kinds IN ('t', 'f', 's') THEN NULL ELSE st END, nullif(lg, '{}'), nullif(bl, 0), xp,
      CASE WHEN kinds IN ('t', 'f', 's') THEN st[1] END, CASE WHEN kinds IN ('t', 'f', 's') THEN st[2] END, CASE WHEN kinds IN ('t', 'f', 's') THEN st[3] END)
    ON CONFLICT (key) DO NOTHING;
  GET DIAGNOSTICS nrows = ROW_COUNT;
END IF;
  END LOOP;
ELSE
  -- Refused: every pair decided again on the state read, charging nothing.
  res := ARRAY[0]::float8[];
  po := 0;
  FOR j IN 1..np LOOP
k := hk[j]; kinds := kss[j]; n := length(kinds);
lims := lims_all[po + 1 : po + n]; pars := pars_all[po + 1 : po + n];
blocks := CASE WHEN blocks_all IS NULL THEN NULL ELSE blocks_all[po + 1 : po + n] END;
tidied := false;
stored_kinds := skd[j]; st := sts[j]::float8[]; lg := lgs[j]::float8[]; bl := bls[j]; xp := xps[j]; found_row := true;
IF stored_kinds IS DISTINCT FROM kinds THEN st := array_fill(0::float8, ARRAY[length(kinds) + 2 * (length(kinds) - length(replace(kinds, 's', '')))
  + (length(kinds) - length(replace(kinds, 'f', '')))]); lg := '{}'; xp := 0; bl := 0; END IF;
r := array_fill(0::float8, ARRAY[1 + 4 * n]);
c := CASE WHEN cost > 0 THEN cost ELSE 1 END;
allowed := true; ch := false;
o := 1; lo := 0;
FOR p IN 1..n LOOP
kd := substr(kinds, p, 1); lim := lims[p]; par := pars[p]; i := 2 + (p - 1) * 4;
CASE kd
WHEN 't' THEN
tat := greatest(st[o], nw);
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
ex := ceil((nx) / 60000000) * 60000000;
WHEN 'f' THEN
sz := par * 1000;
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
WHEN 's' THEN
ix := greatest(floor(nw / (par * 1000)), st[o]);
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
IF cu + c <= lim THEN
  e0 := greatest(0, ceil(par - ((lim - cu - c) * par) / pv));
  WHILE pv * (par - e0) + (cu + c) * par > lim * par LOOP e0 := e0 + 1; END LOOP;
  tat := ws + e0;
ELSE
  e0 := greatest(0, ceil(par - ((lim - c) * par) / cu));
  WHILE cu * (par - e0) + c * par > lim * par LOOP e0 := e0 + 1; END LOOP;
  tat := ws + par + e0;
END IF;
r[i + 3] := greatest(1, ceil(tat - nw / 1000));
  END IF;
END IF;
IF NOT (ch AND r[i] = 1) THEN
  r[i + 1] := greatest(0, floor((bu - cu * par) / par));
  r[i + 2] := CASE WHEN cu > 0 THEN ws + 2 * par WHEN pv > 0 THEN ws + par ELSE ceil(nw / 1000) END;
END IF;
ex := (ws + 2 * par) * 1000;
ELSE
cn := st[o]::int;
e := lg[lo + 1 : lo + cn];
sz := par * 1000;
cn0 := cn;
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
lg := lg[1 : lo] || e || lg[lo + cn0 + 1 :];
st[o] := cardinality(e);
lo := lo + cardinality(e);
END CASE;
IF r[i] = 0 THEN allowed := false; END IF;
o := o + CASE kd WHEN 't' THEN 1 WHEN 'f' THEN 2 WHEN 's' THEN 3 ELSE 1 END;
END LOOP;
r[1] := CASE WHEN allowed AND bl <= nw THEN 1 ELSE 0 END;
    IF bl > nw THEN
FOR p IN 1..n LOOP
  i := 2 + (p - 1) * 4;
  r[i] := 0; r[i + 1] := 0;
  IF r[i + 2] < ceil(bl / 1000) THEN r[i + 2] := ceil(bl / 1000); END IF;
  IF r[i + 3] <> -1 AND r[i + 3] < ceil((bl - nw) / 1000) THEN r[i + 3] := ceil((bl - nw) / 1000); END IF;
END LOOP;
      IF tidied AND stored_kinds = kinds THEN UPDATE floodgate.limits s SET nums = st, logs = nullif(lg, '{}') WHERE s.key = k; END IF;
    ELSE
      bm := 0;
      IF r[1] = 0 AND cost > 0 AND blocks IS NOT NULL THEN
        FOR p IN 1..n LOOP
          IF r[2 + (p - 1) * 4] = 0 AND blocks[p] > bm THEN bm := blocks[p]; END IF;
        END LOOP;
      END IF;
      IF bm > 0 THEN
        bl := nw + bm * 1000;
        xp := greatest(xp, bl);
FOR p IN 1..n LOOP
  i := 2 + (p - 1) * 4;
  r[i] := 0; r[i + 1] := 0;
  IF r[i + 2] < ceil(bl / 1000) THEN r[i + 2] := ceil(bl / 1000); END IF;
  IF r[i + 3] <> -1 AND r[i + 3] < ceil((bl - nw) / 1000) THEN r[i + 3] := ceil((bl - nw) / 1000); END IF;
END LOOP;
IF found_row THEN
  UPDATE floodgate.limits s SET set_kinds = kinds, nums = CASE WHEN kinds IN ('t', 'f', 's') THEN NULL ELSE st END, logs = nullif(lg, '{}'),
  num1 = CASE WHEN kinds IN ('t', 'f', 's') THEN st[1] END, num2 = CASE WHEN kinds IN ('t', 'f', 's') THEN st[2] END, num3 = CASE WHEN kinds IN ('t', 'f', 's') THEN st[3] END,
  blocked_until_us = nullif(bl, 0), expires_at_us = xp WHERE s.key = k;
  nrows := 1;
ELSE
  INSERT INTO floodgate.limits AS s (key, set_kinds, nums, logs, blocked_until_us, expires_at_us, num1, num2, num3)
    VALUES (k, kinds, CASE WHEN kinds IN ('t', 'f', 's') THEN NULL ELSE st END, nullif(lg, '{}'), nullif(bl, 0), xp,
      CASE WHEN kinds IN ('t', 'f', 's') THEN st[1] END, CASE WHEN kinds IN ('t', 'f', 's') THEN st[2] END, CASE WHEN kinds IN ('t', 'f', 's') THEN st[3] END)
    ON CONFLICT (key) DO NOTHING;
  GET DIAGNOSTICS nrows = ROW_COUNT;
END IF;
      ELSIF tidied AND stored_kinds = kinds THEN
        UPDATE floodgate.limits s SET nums = st, logs = nullif(lg, '{}') WHERE s.key = k;
      END IF;
    END IF;
    res := res || r;
    po := po + n;
  END LOOP;
END IF;
DELETE FROM floodgate.limits s WHERE s.key = ANY(made) AND s.set_kinds = '';
RETURN res;
END
$fn$;

CREATE OR REPLACE FUNCTION floodgate.limits_version() RETURNS int LANGUAGE sql IMMUTABLE AS $fn$ SELECT 4 $fn$;
COMMIT;
