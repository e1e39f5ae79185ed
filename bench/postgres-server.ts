/**
 * What a decision costs inside PostgreSQL (a harness, not a timed test). Run:
 * `node --import tsx bench/postgres-server.ts [--calls 4000] [--rounds 3]`.
 *
 * Each subject is called `--calls` times in a `DO` loop that commits after every call (each
 * decision its own transaction, as from a client, but no network and no client), with
 * `synchronous_commit = off` (no wait for the WAL flush). The figure is the CPU time of that one
 * backend (Linux /proc/<pid>/schedstat) per call, median of the rounds, subjects
 * interleaved within a round: steadier than wall time on a shared machine. On the PostgreSQL the
 * tests use, in a database created for the run and dropped after it. Subjects: the loop itself
 * (`PERFORM 1`), Floodgate's function for each counter kind (its charge function) admitting and denying, two
 * policies, and rate-limiter-flexible's `RateLimiterPostgres` upsert (its fixed window) on a
 * table of its own layout. `--baseline FILE`: a migration for the schema `baseline` (another
 * version's functions, e.g. `git show main:packages/postgres/sql/migration.sql | sed
 * 's/\bfloodgate\b/baseline/g'`), each Floodgate subject measured through it too.
 */
import { readFileSync } from "node:fs";
import pg from "pg";
import { postgresStore } from "../packages/postgres/src/index.ts";
import { testDatabase } from "../test/support/postgres-server.ts";

const arg = (name: string, fallback: number): number => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const CALLS = arg("calls", 4000);
const baselineAt = process.argv.indexOf("--baseline");
const baseline = baselineAt > 0 ? readFileSync(process.argv[baselineAt + 1]!, "utf8") : undefined;
const ROUNDS = arg("rounds", 3);

const db = await testDatabase();
const client = new pg.Client(db.connection);
await client.connect();
client.on("error", () => undefined);
const pool = new pg.Pool({ ...db.connection, max: 1 });
pool.on("error", () => undefined);
await postgresStore({ client: pool }).migrate();
await pool.end();
if (baseline !== undefined) await client.query(baseline);
await client.query("CREATE TABLE rlflx (key varchar(255) PRIMARY KEY, points integer NOT NULL DEFAULT 0, expire bigint)");
await client.query("SET synchronous_commit = off");
const pid = (await client.query("SELECT pg_backend_pid() AS pid")).rows[0].pid as number;

/** The backend's CPU time so far, µs (/proc/<pid>/schedstat counts ns). */
const cpuUs = (): number => Number(readFileSync(`/proc/${pid}/schedstat`, "utf8").split(" ")[0]) / 1000;

/** The consume function, as the store calls it for a set of several policies or a sliding log, and as every version before 3 did. */
const consume = (schema: string, prefix: string, kinds: string, lims: string, pars: string): string =>
  `PERFORM ${schema}.limits_consume('${prefix}{u' || (j % 1000) || '}', '${kinds}', '${lims}', '${pars}', NULL, 1, NULL, NULL, 0, 0)`;
/** One counter policy's charge function, as the store calls it (sql/counter.ts). */
const charge = (prefix: string, kind: string, limit: number, parameter: number): string =>
  `PERFORM floodgate.limits_charge_${kind}('${prefix}{u' || (j % 1000) || '}', ${limit}, ${parameter}, 1, NULL, NULL)`;
const HOUR = 3_600_000;
const BIG = 100_000_000;
/** Each subject: its name, its statement now, and (for Floodgate's) the statement through the baseline's functions. */
const subjects: [string, string, string?][] = [
  ["the loop: PERFORM 1", "PERFORM 1"],
  ["Floodgate token bucket, admitted", charge("t", "t", BIG, 1000), consume("baseline", "t", "t", `{${BIG}}`, "{1000}")],
  ["Floodgate fixed window, admitted", charge("f", "f", BIG, HOUR), consume("baseline", "f", "f", `{${BIG}}`, `{${HOUR}}`)],
  ["Floodgate sliding window, admitted", charge("s", "s", BIG, HOUR), consume("baseline", "s", "s", `{${BIG}}`, `{${HOUR}}`)],
  ["Floodgate token bucket, denied", charge("e", "t", 1, HOUR * 1000), consume("baseline", "e", "t", "{1}", `{${HOUR * 1000}}`)],
  ["Floodgate fixed window, denied", charge("d", "f", 1, HOUR), consume("baseline", "d", "f", "{1}", `{${HOUR}}`)],
  ["Floodgate sliding window, denied", charge("w", "s", 1, HOUR), consume("baseline", "w", "s", "{1}", `{${HOUR}}`)],
  [
    "Floodgate sliding log, admitted",
    ...(["floodgate", "baseline"].map((s) => consume(s, "l", "l", "{1000}", "{10000}")) as [string, string]),
  ],
  [
    "Floodgate token bucket + sliding window, admitted",
    ...(["floodgate", "baseline"].map((s) => consume(s, "m", "ts", `{${BIG},${BIG}}`, `{1000,${HOUR}}`)) as [string, string]),
  ],
  [
    "rate-limiter-flexible upsert (fixed window)",
    "INSERT INTO rlflx VALUES ('u' || (j % 1000), 1, 1e15) ON CONFLICT (key) DO UPDATE SET points = CASE WHEN rlflx.expire <= 5 " +
    "THEN 1 ELSE rlflx.points + 1 END, expire = CASE WHEN rlflx.expire <= 5 THEN 1e15 ELSE rlflx.expire END",
  ],
];
if (baseline !== undefined) {
  for (const [name, , before] of [...subjects]) if (before !== undefined) subjects.push([`${name} (baseline)`, before]);
}
const loop = (statement: string, calls: number): string => `DO $$ BEGIN FOR j IN 1..${calls} LOOP ${statement}; COMMIT; END LOOP; END $$`;

// Every identifier's row there (the denied subjects' limit of 1 used up).
for (const [, statement] of subjects) await client.query(loop(statement, 1000));
const figures = new Map<string, number[]>(subjects.map(([name]) => [name, []]));
for (let round = 0; round < ROUNDS; round++) {
  for (const [name, statement] of subjects) {
    const before = cpuUs();
    await client.query(loop(statement, CALLS));
    figures.get(name)!.push((cpuUs() - before) / CALLS);
  }
}
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
console.log(`\n${(await client.query("SHOW server_version")).rows[0].server_version}, ${CALLS} calls per figure, median of ${ROUNDS}\n`);
console.log("| inside the server, per decision | backend CPU µs (rounds) |");
console.log("|---|--:|");
for (const [name, xs] of figures) console.log(`| ${name} | ${Math.round(median(xs))} (${xs.map(Math.round).join(", ")}) |`);
await client.end();
await db.drop();
