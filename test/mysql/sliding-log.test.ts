/**
 * A single sliding log consumed by one UPDATE of its marked row (`consume_l`, sql/log-upsert.ts):
 * the same figures as the memory store on long logs whose entries leave the window one, several
 * or all at a time (the statement's search, and the transaction when it searches no further),
 * one index read per decision on a marked row, and the mark taken off by a block.
 */
import mysql from "mysql2/promise";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRateLimiter, fixedWindow, memoryStore, type PolicySet, slidingLog } from "../../packages/core/src/index.ts";
import { mysqlStore } from "../../packages/mysql/src/index.ts";
import { uniquePrefix } from "../stores/store-contract.ts";
import { mysqlDatabase, type MysqlTestDatabase } from "../support/mysql-server.ts";

const db: MysqlTestDatabase | undefined = await mysqlDatabase();
const T0 = 1_700_000_000_000;

describe.skipIf(db === undefined)("mysqlStore, a single sliding log in one statement", () => {
  let pool: mysql.Pool;
  beforeAll(async () => {
    pool = db!.pool({ connectionLimit: 4 });
    await mysqlStore({ client: pool, database: db!.database }).migrate();
  });
  afterAll(() => db?.drop());

  it("long logs: every figure as the memory store's, entries leaving the window one, several or all at once", async () => {
    const subject = mysqlStore({ client: pool, database: db!.database, clock: "local", sweepEvery: 0 });
    for (const [limit, windowMs] of [[40, 10_000], [300, 60_000], [7, 1_000]] as const) {
      const set: PolicySet = Object.freeze({
        prefix: uniquePrefix(),
        policies: Object.freeze([Object.freeze({ ...slidingLog({ limit, window: windowMs }), name: "l" })]),
      });
      const reference = memoryStore();
      // Steps within a window, across part of it, and past all of it; costs up to 9 units.
      const steps = [0, 1, 13, windowMs / 50, windowMs / 7, windowMs / 3, windowMs + 1];
      let now = T0;
      let seed = limit;
      const next = (n: number): number => (seed = (seed * 1103515245 + 12345) % 2147483648) % n;
      for (let i = 0; i < 400; i++) {
        now += steps[next(steps.length)]!;
        const cost = 1 + next(next(4) === 0 ? 9 : 2);
        const where = `limit ${limit}, step ${i}, cost ${cost}`;
        const expected = await reference.consume(set, "k", cost, now);
        const actual = await subject.consume(set, "k", cost, now);
        expect([...actual], where).toEqual([...expected]);
        if (next(10) === 0 && expected[0] === 1) {
          // A refund into the charge's mark: the other procedures read what the statement wrote.
          await reference.refund(set, "k", cost, now, [expected[5]!]);
          await subject.refund(set, "k", cost, now, [actual[5]!]);
        }
      }
    }
  }, 120_000);

  it("one index read and one row written per decision on a marked row", async () => {
    const connection = await mysql.createConnection({ ...db!.target, database: db!.database });
    try {
      const limiter = createRateLimiter({
        policy: slidingLog({ limit: 1000, window: "1h" }),
        store: mysqlStore({ client: connection, database: db!.database, sweepEvery: 0 }),
        prefix: uniquePrefix(),
        resilience: false,
      });
      await limiter.limit("r");
      const handler = async (): Promise<Record<string, number>> => {
        const [rows] = await connection.query(
          "SHOW SESSION STATUS WHERE Variable_name IN ('Handler_read_key', 'Handler_update', 'Handler_write')",
        );
        return Object.fromEntries((rows as { Variable_name: string; Value: string }[]).map((r) => [r.Variable_name, Number(r.Value)]));
      };
      const before = await handler();
      for (let i = 0; i < 20; i++) expect((await limiter.limit("r")).remaining).toBe(998 - i);
      const after = await handler();
      expect(after.Handler_read_key! - before.Handler_read_key!).toBe(20);
      expect(after.Handler_update! - before.Handler_update!).toBe(20);
      expect(after.Handler_write! - before.Handler_write!).toBe(0);
    } finally {
      await connection.end();
    }
  });

  it("a block written by another procedure takes the log's mark off: the next decision is blocked", async () => {
    const prefix = uniquePrefix();
    const store = mysqlStore({ client: pool, database: db!.database, sweepEvery: 0 });
    const one = createRateLimiter({ policy: slidingLog({ limit: 100, window: "1h" }), store, prefix, resilience: false });
    // A set on the same rows: its first policy shares the log's row, its second blocks at a denial.
    const set = createRateLimiter({
      policy: [slidingLog({ limit: 100, window: "1h" }), fixedWindow({ limit: 1, window: "1h", block: "2h" })],
      store,
      prefix,
      resilience: false,
    });
    const mark = async (): Promise<number> => {
      const [rows] = await pool.query("SELECT n1 FROM floodgate WHERE k = ?", [`${prefix}{k}`]);
      return Number((rows as { n1: number }[])[0]?.n1);
    };
    expect((await one.limit("k")).allowed).toBe(true);
    expect(await mark()).toBe(1);
    expect((await set.limit("k")).allowed).toBe(true);
    expect(await mark()).toBe(1); // the general procedure keeps it
    expect((await set.limit("k")).allowed).toBe(false); // blocks the key for 2 h
    expect(await mark()).toBe(0);
    const blocked = await one.limit("k");
    expect(blocked.allowed).toBe(false);
    expect(blocked.retryAfterMs).toBeGreaterThan(7_000_000);
    await one.unblock("k");
    const after = await one.limit("k");
    expect(after.allowed).toBe(true);
    expect(after.remaining).toBe(97);
    expect(await mark()).toBe(1);
  });
});
