/**
 * PostgreSQL store benchmark (a harness, not a timed test). Run: `npm run bench:postgres`
 * (node --import tsx bench/postgres.ts [--decisions 10000] [--rounds 3]).
 *
 * On the PostgreSQL the tests use (127.0.0.1:5432, else a private instance), in a database
 * created for the run and dropped after it, all subjects in one run, interleaved within each
 * round (each figure is the median of `--rounds`):
 *  - the floor: a bare `SELECT 1` through each client (one round trip, nothing decided);
 *  - Floodgate's store, each algorithm, through node-postgres and postgres.js (limits high
 *    enough that every decision admits; 1,000 identifiers in a cycle); concurrency is a
 *    reservation and its settlement, two calls;
 *  - rate-limiter-flexible `RateLimiterPostgres` (node-postgres pool), fixed window, same load.
 * Concurrency c = c loops each awaiting one decision at a time, over a pool of 16 connections.
 * Round trips per decision are counted at the client (every query sent); rows written per
 * decision from pg_stat_xact_user_tables (node-postgres subjects); bytes per identifier from the rows left after the run
 * (pg_column_size: the heap tuple, before the index). Leased mode: store calls per 1,000
 * decisions of a limiter in `mode: "leased"` on ten busy identifiers. `--baseline DIR`: the
 * counter kinds through another version's store as well (a copy made by
 * scripts/bench-baseline.sh), in the schema `baseline`.
 */
import pg from "pg";
import postgres from "postgres";
import { RateLimiterPostgres } from "rate-limiter-flexible";
import {
  concurrency,
  createRateLimiter,
  fixedWindow,
  type Policy,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from "../packages/core/src/index.ts";
import { postgresStore } from "../packages/postgres/src/index.ts";
import { testDatabase } from "../test/support/postgres-server.ts";

const arg = (name: string, fallback: number): number => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const DECISIONS = arg("decisions", 10_000);
const ROUNDS = arg("rounds", 3);
const IDS = Array.from({ length: 1000 }, (_, i) => `user:${i}`);
const POOL = 16;

const db = await testDatabase();
const sent = { n: 0 };
/** A node-postgres pool that counts the queries it sends (round trips). */
function countedPool(): pg.Pool {
  const pool = new pg.Pool({ ...db.connection, max: POOL });
  pool.on("error", () => undefined);
  const query = pool.query.bind(pool) as (...args: unknown[]) => unknown;
  (pool as unknown as { query: unknown }).query = (...args: unknown[]) => (sent.n++, query(...args));
  return pool;
}
const pool = countedPool();
const rawSql = postgres({ ...db.connection, max: POOL, onnotice: () => undefined });
const js = new Proxy(rawSql, {
  get(target, name, receiver) {
    const value = Reflect.get(target, name, receiver);
    if (name === "unsafe") return (...args: unknown[]) => (sent.n++, (value as (...a: unknown[]) => unknown).apply(target, args));
    return value;
  },
}) as postgres.Sql;
await postgresStore({ client: pool }).migrate();

interface Subject {
  name: string;
  /** The table its rows go to, and the prefix of its keys there (for rows and bytes). */
  table: string;
  prefix?: string;
  decide: (id: string) => Promise<unknown>;
}

const HOUR = "1h";
const BIG = 100_000_000;
const kinds: [string, () => Policy][] = [
  ["token bucket", () => tokenBucket({ capacity: BIG, refillRate: 1000 })],
  ["fixed window", () => fixedWindow({ limit: BIG, window: HOUR })],
  ["sliding window", () => slidingWindow({ limit: BIG, window: HOUR })],
  ["sliding log", () => slidingLog({ limit: 1000, window: "10s" })],
];

const subjects: Subject[] = [
  { name: "floor: SELECT 1 (pg)", table: "", decide: () => pool.query("SELECT 1") },
  { name: "floor: SELECT 1 (postgres.js)", table: "", decide: () => js.unsafe("SELECT 1", [], { prepare: true }) },
];
let serial = 0;
for (const [clientName, client] of [["pg", pool], ["postgres.js", js]] as const) {
  const store = postgresStore({ client, sweepEvery: 0 });
  for (const [kind, policy] of kinds) {
    const prefix = `b${++serial}:`;
    const limiter = createRateLimiter({ policy: policy(), store, prefix, resilience: false });
    subjects.push({ name: `Floodgate ${kind} (${clientName})`, table: "floodgate.limits", prefix, decide: (id) => limiter.limit(id) });
  }
  const prefix = `b${++serial}:`;
  const held = createRateLimiter({ policy: concurrency({ limit: 1000 }), store, prefix, resilience: false });
  subjects.push({
    name: `Floodgate concurrency, reserve + settle (${clientName})`,
    table: "floodgate.limits",
    prefix,
    decide: async (id) => (await held.reserve(id)).settle(1),
  });
}
// The UNLOGGED option: the same functions over tables that skip the write-ahead log.
const unlogged = postgresStore({ client: pool, schema: "floodgate_unlogged", unlogged: true, sweepEvery: 0 });
await unlogged.migrate();
for (const [kind, policy] of kinds.slice(0, 2)) {
  const prefix = `b${++serial}:`;
  const limiter = createRateLimiter({ policy: policy(), store: unlogged, prefix, resilience: false });
  subjects.push({
    name: `Floodgate ${kind}, UNLOGGED (pg)`,
    table: "floodgate_unlogged.limits",
    prefix,
    decide: (id) => limiter.limit(id),
  });
}
// `--baseline DIR`: another version's store (a copy made by scripts/bench-baseline.sh), its
// migration in the schema `baseline`, through node-postgres, for the counter kinds.
const baselineAt = process.argv.indexOf("--baseline");
if (baselineAt > 0) {
  const dir = process.argv[baselineAt + 1]!;
  const before = (await import(`${dir}/packages/postgres/src/index.ts`)) as typeof import("../packages/postgres/src/index.ts");
  const store = before.postgresStore({ client: pool, schema: "baseline", sweepEvery: 0 });
  await store.migrate();
  for (const [kind, policy] of kinds.slice(0, 3)) {
    const prefix = `b${++serial}:`;
    const limiter = createRateLimiter({ policy: policy(), store, prefix, resilience: false });
    subjects.push({ name: `Floodgate ${kind} (pg, baseline)`, table: "baseline.limits", prefix, decide: (id) => limiter.limit(id) });
  }
}
const flexible = await new Promise<RateLimiterPostgres>((resolve, reject) => {
  const limiter: RateLimiterPostgres = new RateLimiterPostgres(
    { storeClient: pool, tableName: "rlflx", points: BIG, duration: 3600, clearExpiredByTimeout: false },
    (error?: unknown) => (error ? reject(error) : resolve(limiter)),
  );
});
subjects.push({
  name: "rate-limiter-flexible RateLimiterPostgres, fixed window (pg)",
  table: "public.rlflx",
  decide: (id) => flexible.consume(id),
});

/** Decisions/s with `c` loops each awaiting one decision at a time. */
async function throughput(subject: Subject, c: number): Promise<number> {
  let next = 0;
  const per = Math.ceil(DECISIONS / c);
  const start = performance.now();
  await Promise.all(Array.from({ length: c }, async () => {
    for (let i = 0; i < per; i++) await subject.decide(IDS[next++ % IDS.length]!);
  }));
  return (per * c * 1000) / (performance.now() - start);
}

const admin = new pg.Pool({ ...db.connection, max: 2 });
admin.on("error", () => undefined);
/**
 * Rows one decision writes (inserted, updated, deleted), exactly: the subject's decision run by
 * itself inside a transaction on the pool's connections while no other subject runs, read from
 * pg_stat_xact_user_tables of that same connection before it commits.
 */
async function rowsPerDecision(subject: Subject): Promise<number> {
  const client = await pool.connect();
  const released = client.release.bind(client);
  // The pool hands this one connection to the subject (max 16, but nothing else runs now).
  const original = pool.query;
  (pool as unknown as { query: unknown }).query = (...args: unknown[]) => (client.query as (...a: unknown[]) => unknown)(...args);
  try {
    // Statistics not yet flushed would count too: flush them first (at the end of this statement).
    await client.query("SELECT pg_stat_force_next_flush()");
    await client.query("BEGIN");
    await subject.decide(IDS[7]!);
    const { rows } = await client.query(
      "SELECT coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0)::float8 AS n FROM pg_stat_xact_user_tables",
    );
    await client.query("COMMIT");
    return rows[0].n as number;
  } finally {
    (pool as unknown as { query: unknown }).query = original;
    released();
  }
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const results = new Map<string, { c1: number[]; c64: number[]; trips: number; rows: number }>();
for (const s of subjects) results.set(s.name, { c1: [], c64: [], trips: 0, rows: 0 });

// Warm-up: every connection opened, every statement prepared, every identifier's row there.
for (const s of subjects) for (const id of IDS) await s.decide(id);
for (let round = 0; round < ROUNDS; round++) {
  for (const s of subjects) {
    const r = results.get(s.name)!;
    const before = sent.n;
    r.c1.push(await throughput(s, 1));
    if (round === 0) {
      r.trips = (sent.n - before) / DECISIONS;
      r.rows = s.name.includes("postgres.js") ? NaN : await rowsPerDecision(s);
    }
    r.c64.push(await throughput(s, 64));
  }
}

async function bytesPerIdentifier(s: Subject): Promise<string> {
  if (s.table === "") return "–";
  const where = s.prefix === undefined ? "" : ` WHERE key LIKE '${s.prefix}%'`;
  const { rows } = await admin.query(`SELECT avg(pg_column_size(t.*))::float8 AS b, count(*)::int AS n FROM ${s.table} t${where}`);
  return `${Math.round(rows[0].b as number)} (${rows[0].n} rows)`;
}

console.log(
  `\nPostgreSQL ${
    (await admin.query("SHOW server_version")).rows[0].server_version
  }, ${DECISIONS} decisions per figure, median of ${ROUNDS} rounds, pool of ${POOL}\n`,
);
console.log(
  "| subject | decisions/s, c=1 | decisions/s, c=64 | round trips / decision | rows written / decision | bytes / identifier (row) |",
);
console.log("|---|--:|--:|--:|--:|--:|");
for (const s of subjects) {
  const r = results.get(s.name)!;
  console.log(
    `| ${s.name} | ${Math.round(median(r.c1))} | ${Math.round(median(r.c64))} | ${r.trips.toFixed(2)} | ${
      Number.isNaN(r.rows) ? "as pg" : r.rows.toFixed(0)
    } | ${await bytesPerIdentifier(s)} |`,
  );
}

// Leased mode: store calls per 1,000 decisions on ten busy identifiers (each 20,000 per minute), against exact mode.
for (
  const [name, policy] of [["fixed window", () => fixedWindow({ limit: 20_000, window: "1m" })], [
    "token bucket",
    () => tokenBucket({ capacity: 20_000, refillRate: 20_000 / 60 }),
  ]] as const
) {
  for (const mode of ["exact", "leased"] as const) {
    const store = postgresStore({ client: pool, sweepEvery: 0 });
    const limiter = createRateLimiter({ policy: policy(), store, prefix: `lease-${name}-${mode}:`, mode, resilience: false });
    for (let i = 0; i < 1000; i++) await limiter.limit(`hot:${i % 10}`);
    const before = sent.n;
    let allowed = 0;
    const start = performance.now();
    for (let i = 0; i < 10_000; i++) if ((await limiter.limit(`hot:${i % 10}`)).allowed) allowed++;
    const perSecond = Math.round(10_000_000 / (performance.now() - start));
    console.log(
      `${name}, ${mode} mode: ${
        ((sent.n - before) / 10).toFixed(1)
      } store calls per 1,000 decisions, ${perSecond} decisions/s at c=1, ${allowed} of 10,000 admitted`,
    );
  }
}

await pool.end();
await admin.end();
await rawSql.end({ timeout: 5 });
await db.drop();
