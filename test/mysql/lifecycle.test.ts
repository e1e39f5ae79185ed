/**
 * The MySQL store's schema and lifecycle: the shipped SQL is the migration, `migrate()` is
 * idempotent, the request path never runs DDL, rows expire and are swept (piggy-backed and by
 * `sweep()`), and a missing migration, another table's layout, lacking privileges or a read-only
 * session get one clear FloodgateError naming the fix, held for a while instead of a query per
 * request. Both mysql2 APIs (promise and callback) drive the store.
 */
import { readFileSync } from "node:fs";
import mysqlCallback from "mysql2";
import mysql from "mysql2/promise";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRateLimiter, fixedWindow, FloodgateError, slidingLog, tokenBucket } from "../../packages/core/src/index.ts";
import { migrationSql, migrationStatements, mysqlStore } from "../../packages/mysql/src/index.ts";
import { uniquePrefix } from "../stores/store-contract.ts";
import { mysqlDatabase, type MysqlTestDatabase } from "../support/mysql-server.ts";

const db: MysqlTestDatabase | undefined = await mysqlDatabase();

/** A pool on the test database counting the statements sent through it. */
function countingPool(): { pool: mysql.Pool; sent: string[] } {
  const pool = db!.pool();
  const sent: string[] = [];
  const query = pool.query.bind(pool) as (...args: unknown[]) => unknown;
  (pool as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
    sent.push(String(args[0]));
    return query(...args);
  };
  return { pool, sent };
}

it("the shipped floodgate.sql is the migration of the default table", () => {
  const shipped = readFileSync(new URL("../../packages/mysql/floodgate.sql", import.meta.url), "utf8");
  expect(shipped).toBe(migrationSql());
  expect(migrationSql({ database: "app", table: "limits" })).toContain("CREATE PROCEDURE `app`.`limits_v1_consume`");
});

describe.skipIf(db === undefined)("mysql store lifecycle", () => {
  let pool: mysql.Pool;
  beforeAll(() => {
    pool = db!.pool();
  });
  afterAll(async () => {
    await db?.drop();
  });

  it("before the migration: one FloodgateError naming migrate(), held without a query per request; then migrate() twice, and it works", async () => {
    const { pool: counted, sent } = countingPool();
    const store = mysqlStore({ client: counted, database: db!.database, table: "lifecycle" });
    const limiter = createRateLimiter({
      policy: fixedWindow({ limit: 3, window: "1h" }),
      store,
      prefix: uniquePrefix(),
      resilience: false,
    });
    const error = await limiter.limit("k").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(FloodgateError);
    expect((error as FloodgateError).code).toBe("STORE_ERROR");
    expect((error as Error).message).toMatch(/migrate\(\)/);
    const before = sent.length;
    for (let i = 0; i < 5; i++) await expect(limiter.limit("k")).rejects.toBe(error);
    expect(sent.length).toBe(before); // held: no statement sent
    await store.migrate();
    await store.migrate(); // idempotent
    const statements = sent.length;
    expect((await limiter.limit("k")).remaining).toBe(2);
    // The request path is one CALL, never DDL.
    expect(sent.slice(statements)).toHaveLength(1);
    expect(sent.at(-1)).toMatch(/^CALL `[^`]+`\.`lifecycle_v1_consume_f`\(/);
    expect(sent.slice(statements).some((s) => /\b(CREATE|DROP|ALTER)\b/i.test(s))).toBe(false);
  });

  it("a table of another layout under the name: an error naming the `table` option", async () => {
    await pool.query("CREATE TABLE other_layout (id INT PRIMARY KEY)");
    const store = mysqlStore({ client: pool, database: db!.database, table: "other_layout" });
    // The table exists, so the migration keeps it; its procedures then meet the wrong columns.
    await store.migrate();
    const limiter = createRateLimiter({
      policy: fixedWindow({ limit: 3, window: "1h" }),
      store,
      prefix: uniquePrefix(),
      resilience: false,
    });
    await expect(limiter.limit("k")).rejects.toThrow(/not a Floodgate table.*`table` option/);
  });

  it("lacking privileges: an error naming the grants", async () => {
    const user = `fg_ro_${process.pid}`;
    await pool.query(`CREATE USER IF NOT EXISTS '${user}'@'%' IDENTIFIED BY 'pw'`);
    await pool.query(`CREATE USER IF NOT EXISTS '${user}'@'localhost' IDENTIFIED BY 'pw'`);
    try {
      await mysqlStore({ client: pool, database: db!.database }).migrate();
      for (const host of ["%", "localhost"]) await pool.query(`GRANT SELECT ON \`${db!.database}\`.* TO '${user}'@'${host}'`);
      const limited = mysql.createPool({ ...db!.target, user, password: "pw", database: db!.database, connectionLimit: 1 });
      try {
        const limiter = createRateLimiter({
          policy: fixedWindow({ limit: 3, window: "1h" }),
          store: mysqlStore({ client: limited, database: db!.database }),
          prefix: uniquePrefix(),
          resilience: false,
        });
        await expect(limiter.limit("k")).rejects.toThrow(/lacks a privilege.*grant it EXECUTE/);
      } finally {
        await limited.end();
      }
    } finally {
      for (const host of ["%", "localhost"]) await pool.query(`DROP USER IF EXISTS '${user}'@'${host}'`);
    }
  });

  it("a read-only session (as on a replica): an error saying to connect to the primary", async () => {
    await mysqlStore({ client: pool, database: db!.database }).migrate();
    const connection = await mysql.createConnection({ ...db!.target, database: db!.database });
    try {
      await connection.query("SET SESSION TRANSACTION READ ONLY");
      const limiter = createRateLimiter({
        policy: tokenBucket({ capacity: 3, refillRate: 1 }),
        store: mysqlStore({ client: connection, database: db!.database }),
        prefix: uniquePrefix(),
        resilience: false,
      });
      await expect(limiter.limit("k")).rejects.toThrow(/read-only.*primary/);
    } finally {
      await connection.end();
    }
  });

  it("mysql2's callback API: the same decisions through the pool's callbacks", async () => {
    const callbackPool = mysqlCallback.createPool({ ...db!.target, database: db!.database, connectionLimit: 2 });
    try {
      const store = mysqlStore({ client: callbackPool, database: db!.database });
      await store.migrate();
      const limiter = createRateLimiter({ policy: slidingLog({ limit: 2, window: "1h" }), store, prefix: uniquePrefix() });
      expect((await limiter.limit("k")).remaining).toBe(1);
      expect((await limiter.limit("k")).remaining).toBe(0);
      expect((await limiter.limit("k")).allowed).toBe(false);
    } finally {
      await new Promise((resolve) => callbackPool.end(resolve));
    }
  });

  it("every row carries its expiry; writes sweep expired rows in bounded steps; sweep() deletes the rest", async () => {
    const table = "sweeping";
    const admin = mysqlStore({ client: pool, database: db!.database, table });
    await admin.migrate();
    const count = async (): Promise<number> => {
      const [rows] = await pool.query(`SELECT COUNT(*) AS n FROM \`${table}\``);
      return Number((rows as { n: number }[])[0]!.n);
    };
    // 300 identifiers charged at a time long past: every row expired.
    const past = createRateLimiter({
      policy: fixedWindow({ limit: 5, window: "1s" }),
      store: mysqlStore({ client: pool, database: db!.database, table, clock: "local", sweepEvery: 0 }),
      prefix: uniquePrefix(),
      clock: () => 1_600_000_000_000,
    });
    for (let i = 0; i < 300; i++) await past.limit(`old${i}`);
    expect(await count()).toBe(300);
    const [expiries] = await pool.query(`SELECT MIN(expires_us) AS lo, MAX(expires_us) AS hi FROM \`${table}\``);
    expect(Number((expiries as { hi: number }[])[0]!.hi)).toBeLessThanOrEqual(1_600_000_001_000_000);
    // Writes on the server's clock, each sweeping at most 8 rows.
    const live = createRateLimiter({
      policy: fixedWindow({ limit: 100, window: "1h" }),
      store: mysqlStore({ client: pool, database: db!.database, table, sweepEvery: 1, sweepRows: 8 }),
      prefix: uniquePrefix(),
    });
    for (let i = 0; i < 10; i++) await live.limit("now");
    expect(await count()).toBe(300 - 80 + 1);
    expect(await admin.sweep(100)).toBe(100);
    expect(await admin.sweep()).toBe(120);
    expect(await count()).toBe(1); // the live row stays
  });

  it("migrationStatements() runs as it is through any client (one statement each)", async () => {
    for (const statement of migrationStatements({ database: db!.database, table: "by_hand" })) await pool.query(statement);
    const store = mysqlStore({ client: pool, database: db!.database, table: "by_hand" });
    const limiter = createRateLimiter({ policy: fixedWindow({ limit: 2, window: "1h" }), store, prefix: uniquePrefix() });
    expect((await limiter.limit("k")).remaining).toBe(1);
  });
});
