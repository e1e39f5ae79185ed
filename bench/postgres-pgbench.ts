/**
 * What one decision costs PostgreSQL, driven by `pgbench` instead of Node (a harness, not a timed
 * test). Run: `node --import tsx bench/postgres-pgbench.ts [--seconds 5] [--rounds 3]`.
 *
 * The client is pgbench (C, prepared statements, one transaction per statement), so the figure is
 * the server's work per decision and the wire, not a Node client's: decisions/s at 1 and 16
 * clients over 10,000 identifiers picked at random, every decision admitted, with
 * `synchronous_commit = off` so that the server's CPU, not the disk's flush, decides, after a
 * warm-up that has written every identifier's row. Subjects,
 * interleaved within each round (each figure is the median of the rounds):
 *  - the floor, `SELECT 1`;
 *  - Floodgate's statement for each counter kind, as the store sends it (sql/direct.ts);
 *  - the same kind through its charge function (`SELECT <table>_charge_<kind>(...)`), the path
 *    the store took before the statement;
 *  - rate-limiter-flexible's `RateLimiterPostgres` upsert (its fixed window), on a table of its
 *    own layout, with its expiry in ms from `now()`.
 * On the PostgreSQL the tests use, in a database created for the run and dropped after it;
 * needs `pgbench` on PATH (Debian: postgresql-contrib, or the server package).
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import { postgresStore } from "../packages/postgres/src/index.ts";
import { directCharge } from "../packages/postgres/src/sql/direct.ts";
import { testDatabase } from "../test/support/postgres-server.ts";

const arg = (name: string, fallback: number): number => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const SECONDS = arg("seconds", 5);
const ROUNDS = arg("rounds", 3);
const CLIENTS = [1, 16];

if (spawnSync("pgbench", ["--version"]).status !== 0) {
  console.log("pgbench not found on PATH: install PostgreSQL's client programs (Debian: postgresql-contrib)");
  process.exit(1);
}

const db = await testDatabase();
const dir = mkdtempSync(path.join(os.tmpdir(), "floodgate-pgbench-"));
try {
  const pool = new pg.Pool({ ...db.connection, max: 1 });
  pool.on("error", () => undefined);
  await postgresStore({ client: pool }).migrate();
  await pool.query("CREATE TABLE rlflx (key varchar(255) PRIMARY KEY, points integer NOT NULL DEFAULT 0, expire bigint)");
  await pool.end();

  const BIG = 1_000_000_000;
  /** Each kind's limit and parameter (µs per token, or the window in ms): every decision admits. */
  const kinds = { t: [BIG, 1000], f: [BIG, 3_600_000], s: [BIG, 3_600] } as const;
  const names = { t: "token bucket", f: "fixed window", s: "sliding window" } as const;
  const key = (prefix: string): string => `('${prefix}{u' || :k || '}')`;
  const nowMs = "(extract(epoch FROM now()) * 1000)::bigint";
  const subjects: [string, string][] = [["floor: SELECT 1", "SELECT 1"]];
  for (const kind of ["t", "f", "s"] as const) {
    const [limit, parameter] = kinds[kind];
    const statement = directCharge(kind).replaceAll("@S", "floodgate").replaceAll("@T", "limits")
      .replaceAll("$1::text", key(`d${kind}`)).replaceAll("$2::float8", `${limit}::float8`)
      .replaceAll("$3::float8", `${parameter}::float8`).replaceAll("$4::float8", "1::float8")
      .replaceAll("$5::float8", "NULL::float8");
    subjects.push([`Floodgate ${names[kind]}: the statement`, statement.replaceAll("\n", " ")]);
    subjects.push([
      `Floodgate ${names[kind]}: its charge function`,
      `SELECT floodgate.limits_charge_${kind}(${key(`c${kind}`)}, ${limit}, ${parameter}, 1, NULL, NULL)`,
    ]);
  }
  subjects.push([
    "rate-limiter-flexible RateLimiterPostgres upsert (fixed window)",
    `INSERT INTO rlflx VALUES ('u' || :k, 1, ${nowMs} + 3600000) ON CONFLICT (key) DO UPDATE SET points = CASE WHEN rlflx.expire <= ${nowMs} ` +
    `THEN 1 ELSE rlflx.points + 1 END, expire = CASE WHEN rlflx.expire <= ${nowMs} THEN ${nowMs} + 3600000 ELSE rlflx.expire END RETURNING points, expire`,
  ]);

  const files = subjects.map(([, sql], i) => {
    const file = path.join(dir, `${i}.sql`);
    writeFileSync(file, `\\set k random(1, 10000)\n${sql};\n`);
    return file;
  });
  /** Decisions/s of one subject at c clients for `seconds`. */
  const pgbench = (i: number, c: number, seconds: number): number => {
    const out = spawnSync("pgbench", [
      ...["-n", "-M", "prepared", "-c", String(c), "-j", String(Math.min(c, 2)), "-T", String(seconds)],
      ...["-h", db.connection.host, "-p", String(db.connection.port), "-U", db.connection.user, "-f", files[i]!, db.database],
    ], { encoding: "utf8", env: { ...process.env, PGOPTIONS: "-c synchronous_commit=off" } });
    const tps = /tps = ([\d.]+)/.exec(out.stdout)?.[1];
    if (tps === undefined) throw new Error(`pgbench failed for ${subjects[i]![0]}: ${out.stderr || out.stdout}`);
    return Number(tps);
  };
  // Warm-up: every identifier's row inserted, so that the rounds measure updates.
  subjects.forEach((_, i) => pgbench(i, 4, 3));
  const runs = new Map<string, number[]>();
  for (let round = 0; round < ROUNDS; round++) {
    for (const c of CLIENTS) {
      subjects.forEach(([name], i) => {
        const at = `${name}|${c}`;
        runs.set(at, [...(runs.get(at) ?? []), pgbench(i, c, SECONDS)]);
      });
    }
  }
  const median = (values: number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
  const peer = (c: number): number => median(runs.get(`${subjects.at(-1)![0]}|${c}`)!);
  console.log(
    `\n${(await versionOf(
      db.connection,
    ))}, pgbench -M prepared, ${SECONDS} s per figure, median of ${ROUNDS} rounds, synchronous_commit off, 10,000 identifiers\n`,
  );
  console.log("| subject | c=1 | c=16 | ÷ rate-limiter-flexible, c=1 | c=16 |");
  console.log("|---|--:|--:|--:|--:|");
  for (const [name] of subjects) {
    const [one, sixteen] = CLIENTS.map((c) => median(runs.get(`${name}|${c}`)!));
    console.log(
      `| ${name} | ${one!.toFixed(0)} | ${sixteen!.toFixed(0)} | ${(one! / peer(1)).toFixed(2)} | ${(sixteen! / peer(16)).toFixed(2)} |`,
    );
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
  await db.drop();
}

async function versionOf(connection: pg.ClientConfig): Promise<string> {
  const client = new pg.Client(connection);
  await client.connect();
  try {
    return String((await client.query("SELECT version()")).rows[0].version).split(" on ")[0]!;
  } finally {
    await client.end();
  }
}
