/**
 * MySQL/MariaDB store benchmark (a harness, not a timed test). Run: `npm run bench:mysql`
 * (node --import tsx bench/mysql.ts [--decisions 4000] [--rounds 3]).
 *
 * On the server test/support/mysql-server.ts finds (the one on 127.0.0.1:3306, else a private
 * one), in a database of its own dropped at the end, through one mysql2 callback pool of 64
 * connections shared by every subject, at concurrency 1 and 64 (c loops, each awaiting one
 * decision at a time), 1,000 identifiers in a cycle, every decision admitted:
 *  - the floors: a bare `SELECT 1` through the same pool (one round trip, nothing decided), a
 *    CALL of a procedure answering one row, and one upsert in its own transaction (one durable
 *    write of one row, no answer);
 *  - Floodgate's store, each kind (1e8 per hour; the sliding log 1e8 per minute, so that its log
 *    stays short) and a set of three policies; a fixed window through the general consume
 *    procedure (what a single policy cost before its kind had a procedure of its own);
 *  - rate-limiter-flexible's `RateLimiterMySQL` (fixed window, its only algorithm, same pool).
 * Each figure is the median of `--rounds` rounds, subjects interleaved within a round.
 * Statements per decision (round trips: every statement here is one) and rows read and written per
 * decision (the handler counters: index look-ups and rows written) come from the server's global counters around a pass of 1,000 decisions
 * at c=1 (other clients of a shared server would add to them: the figures are rounded).
 * Bytes per identifier: 10,000 identifiers charged once in a fresh table, then the bytes of their
 * records as InnoDB lays them out (keys, columns, record headers, the expiry index), averaged:
 * the table's page-level statistics are too coarse at this size to tell the stores apart.
 * Server CPU per decision at c=64: the server process's CPU time (Linux /proc, when the server
 * runs on this machine) over the decisions, steadier than decisions/s on a shared machine.
 * Leased mode: store calls per 1,000 decisions on one key at 100 decisions/s of the limiter's
 * clock (5 s leases), against 1,000 in exact mode.
 */
import { readFileSync } from "node:fs";
import mysql from "mysql2";
import { RateLimiterMySQL } from "rate-limiter-flexible";
import {
  createRateLimiter,
  fixedWindow,
  type Policy,
  type RateLimiter,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from "../packages/core/src/index.ts";
import { mysqlStore } from "../packages/mysql/src/index.ts";
import { mysqlDatabase } from "../test/support/mysql-server.ts";

const arg = (name: string, fallback: number): number => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const DECISIONS = arg("decisions", 4000);
const ROUNDS = arg("rounds", 3);
const IDS = Array.from({ length: 1000 }, (_, i) => `user:${i}`);
const HOUR = 3_600_000;

const db = await mysqlDatabase();
if (db === undefined) process.exit(0);
const pool = mysql.createPool({ ...db.target, database: db.database, connectionLimit: 64 });
const promisePool = pool.promise();
const query = async (sql: string): Promise<Record<string, unknown>[]> => (await promisePool.query(sql))[0] as Record<string, unknown>[];
const [version] = await query("SELECT VERSION() AS v");
await mysqlStore({ client: pool, database: db.database }).migrate();

const POLICIES: [string, () => Policy[]][] = [
  ["token bucket", () => [tokenBucket({ capacity: 100_000_000, refillRate: 100_000_000 / 3600 })]],
  ["fixed window", () => [fixedWindow({ limit: 100_000_000, window: HOUR })]],
  ["sliding window", () => [slidingWindow({ limit: 100_000_000, window: HOUR })]],
  ["sliding log", () => [slidingLog({ limit: 100_000_000, window: 60_000 })]],
  ["3 policies (bucket, window, day)", () => [
    tokenBucket({ capacity: 100_000_000, refillRate: 100_000_000 / 3600, name: "b" }),
    slidingWindow({ limit: 100_000_000, window: HOUR, name: "h" }),
    fixedWindow({ limit: 10_000_000, window: 24 * HOUR, name: "d" }),
  ]],
];

interface Subject {
  name: string;
  decide: (id: string) => Promise<unknown>;
}

// The floors: one round trip; one CALL of a procedure that answers one row (what a CALL costs
// beyond it); one durable write of one row, an upsert in its own transaction, answering nothing.
await query("CREATE PROCEDURE bench_noop() SELECT 1 AS r");
await query("CREATE TABLE bench_upsert (k VARBINARY(255) NOT NULL PRIMARY KEY, n INT NOT NULL) ENGINE=InnoDB");
const subjects: Subject[] = [
  { name: "floor: SELECT 1", decide: () => promisePool.query("SELECT 1") },
  { name: "floor: CALL of a procedure answering SELECT 1", decide: () => promisePool.query("CALL bench_noop()") },
  {
    name: "floor: one upsert, autocommit, no answer",
    decide: (id) => promisePool.query("INSERT INTO bench_upsert VALUES (?, 1) ON DUPLICATE KEY UPDATE n = n + 1", [id]),
  },
];
for (const [i, [name, policies]] of POLICIES.entries()) {
  // A prefix of its own per subject (two kinds on one key would take each other's rows): a
  // sliding log of 1e8 per minute grows one entry per decision.
  const limiter: RateLimiter = createRateLimiter({
    policy: policies(),
    store: mysqlStore({ client: pool, database: db.database }),
    prefix: `b${i}:`,
    resilience: false,
  });
  subjects.push({ name: `Floodgate ${name}`, decide: (id) => limiter.limit(id) });
}
// The general consume procedure that a set of several policies calls, given one fixed window:
// what a single policy cost before it had its kind's own procedure (a sweep every 16th call, as
// the store's default).
let generalCalls = 0;
subjects.push({
  name: "Floodgate fixed window through the general consume",
  decide: (id) =>
    promisePool.query("CALL floodgate_v1_consume(?, 'f', '100000000,3600000,0', 1, NULL, 1, NULL, 0, ?)", [
      `g:{${id}}`,
      ++generalCalls % 16 === 0 ? 64 : 0,
    ]),
});
const flexible = await new Promise<RateLimiterMySQL>((resolve, reject) => {
  const limiter: RateLimiterMySQL = new RateLimiterMySQL(
    { storeClient: pool, storeType: "pool", dbName: db.database, tableName: "rlflx", points: 100_000_000, duration: 3600 },
    (error?: unknown) => (error ? reject(error) : resolve(limiter)),
  );
});
subjects.push({ name: "rate-limiter-flexible RateLimiterMySQL (fixed window)", decide: (id) => flexible.consume(id) });

/** The server's pid, read from its pid file when this process can (a server on this machine). */
const [pidFile] = await query("SELECT @@pid_file AS f");
let serverPid: number | undefined;
try {
  serverPid = Number(readFileSync(String(pidFile!.f), "utf8").trim());
} catch {
  serverPid = undefined;
}
/** The server's CPU time so far, µs (Linux /proc; 100 ticks per second). */
function serverCpuUs(): number {
  if (serverPid === undefined) return NaN;
  const fields = readFileSync(`/proc/${serverPid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return (Number(fields[11]) + Number(fields[12])) * 10_000;
}

async function rate(subject: Subject, concurrency: number): Promise<{ rate: number; cpuUs: number }> {
  let next = 0;
  const cpu = serverCpuUs();
  const started = performance.now();
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (next < DECISIONS) await subject.decide(IDS[next++ % IDS.length]!);
  }));
  return { rate: DECISIONS / ((performance.now() - started) / 1000), cpuUs: (serverCpuUs() - cpu) / DECISIONS };
}

const status = async (): Promise<Record<string, number>> => {
  const rows = await query(
    "SHOW GLOBAL STATUS WHERE Variable_name IN ('Questions', 'Handler_read_key', 'Handler_read_next', 'Handler_write', 'Handler_update', 'Handler_delete')",
  );
  return Object.fromEntries(rows.map((r) => [String(r.Variable_name), Number(r.Value)]));
};

/** Statements (round trips) and rows per decision: counters around 1,000 decisions at c=1. */
async function counts(subject: Subject): Promise<{ trips: number; read: number; written: number }> {
  const before = await status();
  for (let i = 0; i < 1000; i++) await subject.decide(IDS[i % IDS.length]!);
  const after = await status();
  const d = (k: string): number => (after[k]! - before[k]!) / 1000;
  // The two SHOW GLOBAL STATUS statements count themselves.
  return {
    trips: (after.Questions! - before.Questions! - 1) / 1000,
    read: d("Handler_read_key") + d("Handler_read_next"),
    written: d("Handler_write") + d("Handler_update") + d("Handler_delete"),
  };
}

/** Bytes per identifier: 10,000 identifiers charged once into a fresh table. */
async function bytesPerIdentifier(
  make: (table: string) => Promise<(id: string) => Promise<unknown>>,
  table: string,
  payload: string,
): Promise<number> {
  const decide = await make(table);
  const ids = Array.from({ length: 10_000 }, (_, i) => `user:${i}`);
  let next = 0;
  await Promise.all(Array.from({ length: 32 }, async () => {
    while (next < ids.length) await decide(ids[next++]!);
  }));
  const [row] = await query(`SELECT SUM(${payload}) AS bytes FROM \`${table}\``);
  return Number(row!.bytes) / ids.length;
}

const median = (xs: number[]): number => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const results = new Map<string, { c1: number[]; c64: number[]; cpu: number[] }>();
for (const s of subjects) await s.decide("warm-up");
for (let round = 0; round < ROUNDS; round++) {
  for (const s of subjects) {
    const r = results.get(s.name) ?? { c1: [], c64: [], cpu: [] };
    r.c1.push((await rate(s, 1)).rate);
    const c64 = await rate(s, 64);
    r.c64.push(c64.rate);
    r.cpu.push(c64.cpuUs);
    results.set(s.name, r);
  }
}
console.log(`\n${version!.v}, ${DECISIONS} decisions per figure, median of ${ROUNDS} rounds\n`);
console.log(
  "| subject | decisions/s c=1 | decisions/s c=64 | server CPU µs / decision (c=64) | statements (round trips) / decision | rows read / written per decision |",
);
console.log("| --- | ---: | ---: | ---: | ---: | ---: |");
for (const s of subjects) {
  const r = results.get(s.name)!;
  const c = await counts(s);
  console.log(
    `| ${s.name} | ${Math.round(median(r.c1))} | ${Math.round(median(r.c64))} | ${Math.round(median(r.cpu))} | ${c.trips.toFixed(2)} | ${
      c.read.toFixed(1)
    } / ${c.written.toFixed(1)} |`,
  );
}

// What a row stores, in bytes, as InnoDB's row format lays it out: the key's bytes plus a length
// byte, each column's width (BIGINT 8, INT 4, CHAR(1) ascii 1), the log's bytes; then the
// secondary index's entry (its column and the key again); then InnoDB's own 18 bytes per record
// in each index (header, transaction id, roll pointer; 5 in a secondary index).
const FLOODGATE_ROW =
  "(LENGTH(k) + 1 + 1 + 8 * 4 + COALESCE(LENGTH(entries), 0) + IF(entries IS NULL, 0, 1) + 18) + (8 + LENGTH(k) + 1 + 5)";
const FLEXIBLE_ROW = "(LENGTH(`key`) + 1 + 4 + 8 + 18)";
const sizes: [string, number][] = [];
// 100 per hour, as rate-limiter-flexible's `points: 100, duration: 3600` (one request each).
const SIZED: [string, Policy][] = [
  ["token bucket", tokenBucket({ capacity: 100, refillRate: 100 / 3600 })],
  ["fixed window", fixedWindow({ limit: 100, window: HOUR })],
  ["sliding window", slidingWindow({ limit: 100, window: HOUR })],
  ["sliding log", slidingLog({ limit: 100, window: HOUR })],
];
for (const [name, policy] of SIZED) {
  sizes.push([
    `Floodgate ${name}`,
    await bytesPerIdentifier(
      async (table) => {
        const store = mysqlStore({ client: pool, database: db.database, table, sweepEvery: 0 });
        await store.migrate();
        const limiter = createRateLimiter({ policy, store, prefix: "rl:", resilience: false });
        return (id) => limiter.limit(id);
      },
      `size_${name.replace(/ /g, "_")}`,
      FLOODGATE_ROW,
    ),
  ]);
}
sizes.push([
  "rate-limiter-flexible RateLimiterMySQL",
  await bytesPerIdentifier(
    async (table) => {
      const limiter = await new Promise<RateLimiterMySQL>((resolve, reject) => {
        const l: RateLimiterMySQL = new RateLimiterMySQL(
          { storeClient: pool, storeType: "pool", dbName: db.database, tableName: table, points: 100, duration: 3600 },
          (error?: unknown) => (error ? reject(error) : resolve(l)),
        );
      });
      return (id) => limiter.consume(id);
    },
    "size_rlflx",
    FLEXIBLE_ROW,
  ),
]);
console.log("\n| subject | bytes per identifier (row and index records, keys `rl:{user:N}`) |\n| --- | ---: |");
for (const [name, bytes] of sizes) console.log(`| ${name} | ${Math.round(bytes)} |`);

// Leased mode: store calls per 1,000 decisions on one key at 100 decisions/s (the limiter's clock).
let calls = 0;
const store = mysqlStore({ client: pool, database: db.database, clock: "local" });
const lease = store.lease.bind(store);
store.lease = (...args) => (calls++, lease(...args));
let now = Date.now();
const leased = createRateLimiter({
  policy: fixedWindow({ limit: 100_000_000, window: HOUR }),
  store,
  prefix: "leased:",
  clock: () => now,
  mode: "leased",
  leaseMs: 5000,
});
for (let i = 0; i < 1000; i++) {
  now += 10;
  const d = await leased.limit("hot");
  await d.pending;
}
await leased.flush();
console.log(`\nLeased mode (5 s leases, one key at 100 decisions/s): ${calls} store calls per 1,000 decisions (exact mode: 1,000)`);

await new Promise((resolve) => pool.end(resolve));
await db.drop();
