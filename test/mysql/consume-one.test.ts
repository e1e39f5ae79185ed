/**
 * One policy consumed by its kind's own procedure (`consume_t`, `consume_f`, `consume_s`,
 * `consume_l`): an admission writes the row, a denial writes nothing, a block in force denies and
 * charges nothing, a policy with a `block` starts it at a charging denial, and callers racing on a
 * new key are all counted (the one that finds the key inserted first decides again).
 */
import mysql from "mysql2/promise";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRateLimiter, fixedWindow, type Policy, slidingLog, slidingWindow, tokenBucket } from "../../packages/core/src/index.ts";
import { mysqlStore } from "../../packages/mysql/src/index.ts";
import { uniquePrefix } from "../stores/store-contract.ts";
import { mysqlDatabase, type MysqlTestDatabase } from "../support/mysql-server.ts";

const db: MysqlTestDatabase | undefined = await mysqlDatabase();

const KINDS: [string, string, (limit: number) => Policy][] = [
  ["token bucket", "t", (limit) => tokenBucket({ capacity: limit, refillRate: limit / 3600 })],
  ["fixed window", "f", (limit) => fixedWindow({ limit, window: "1h" })],
  ["sliding window", "s", (limit) => slidingWindow({ limit, window: "1h" })],
  ["sliding log", "l", (limit) => slidingLog({ limit, window: "1h" })],
];

describe.skipIf(db === undefined)("mysqlStore, one policy consumed by its kind's procedure", () => {
  let pool: mysql.Pool;
  const sent: string[] = [];
  beforeAll(async () => {
    pool = db!.pool({ connectionLimit: 8 });
    await mysqlStore({ client: pool, database: db!.database }).migrate();
    const query = pool.query.bind(pool) as (...args: unknown[]) => unknown;
    (pool as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
      sent.push(String(args[0]));
      return query(...args);
    };
  });
  afterAll(() => db?.drop());

  /** The row's columns, as stored. */
  const row = async (key: string): Promise<Record<string, unknown> | undefined> => {
    const [rows] = await pool.query("SELECT kind, n1, n2, n3, HEX(entries) AS log, expires_us FROM floodgate WHERE k = ?", [key]);
    return (rows as Record<string, unknown>[])[0];
  };
  const limiterOf = (policy: Policy | Policy[], prefix: string) =>
    createRateLimiter({ policy, store: mysqlStore({ client: pool, database: db!.database, sweepEvery: 0 }), prefix, resilience: false });

  for (const [name, code, policy] of KINDS) {
    it(`${name}: one CALL of consume_${code}; admissions write the row, a denial does not`, async () => {
      const prefix = uniquePrefix();
      const limiter = limiterOf(policy(2), prefix);
      const before = sent.length;
      expect((await limiter.limit("a")).remaining).toBe(1);
      expect(sent.slice(before)).toHaveLength(1);
      expect(sent.at(-1)).toMatch(new RegExp(`^CALL \`[^\`]+\`\\.\`floodgate_v1_consume_${code}\`\\(`));
      const first = await row(`${prefix}{a}`);
      expect(first?.kind).toBe(code);
      const second = await limiter.limit("a");
      expect(second.allowed).toBe(true);
      expect(second.remaining).toBe(0);
      const charged = await row(`${prefix}{a}`);
      expect(charged).not.toEqual(first);
      const denied = await limiter.limit("a");
      expect(denied.allowed).toBe(false);
      expect(denied.retryAfterMs).toBeGreaterThan(0);
      expect(await row(`${prefix}{a}`)).toEqual(charged);
    });

    it(`${name}: a block in force denies what the policy would admit and charges nothing`, async () => {
      const prefix = uniquePrefix();
      const limiter = limiterOf(policy(5), prefix);
      await limiter.limit("b");
      await limiter.block("b", "1h");
      const before = await row(`${prefix}{b}`);
      for (let i = 0; i < 3; i++) {
        const blocked = await limiter.limit("b");
        expect(blocked.allowed).toBe(false);
        expect(blocked.retryAfterMs).toBeGreaterThan(3_500_000);
      }
      // A blocked new key: denied, and no row written for it.
      await limiter.block("new", "1h");
      expect((await limiter.limit("new")).allowed).toBe(false);
      expect(await row(`${prefix}{new}`)).toBeUndefined();
      expect(await row(`${prefix}{b}`)).toEqual(before);
      await limiter.unblock("b");
      const after = await limiter.limit("b");
      expect(after.allowed).toBe(true);
      expect(after.remaining).toBe(3);
    });
  }

  it("a policy with a block starts it at a charging denial", async () => {
    const prefix = uniquePrefix();
    const limiter = limiterOf(fixedWindow({ limit: 1, window: "1h", block: "2h" }), prefix);
    expect((await limiter.limit("c")).allowed).toBe(true);
    const denied = await limiter.limit("c");
    expect(denied.allowed).toBe(false);
    expect(denied.retryAfterMs).toBeGreaterThan(7_000_000);
    const [rows] = await pool.query(
      "SELECT n1 - TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) AS left_us FROM floodgate WHERE k = ? AND kind = 'b'",
      [`${prefix}{c}:b`],
    );
    expect(Number((rows as { left_us: number }[])[0]?.left_us)).toBeGreaterThan(7_000_000_000);
  });

  it("a block written by any procedure takes the mark off the row: the next single-policy decision is blocked", async () => {
    const prefix = uniquePrefix();
    const one = limiterOf(fixedWindow({ limit: 100, window: "1h" }), prefix);
    // Another set on the same rows: its first policy shares the row, its second blocks at a denial.
    const set = limiterOf([fixedWindow({ limit: 100, window: "1h" }), slidingWindow({ limit: 1, window: "1h", block: "2h" })], prefix);
    expect((await one.limit("k")).allowed).toBe(true);
    expect((await row(`${prefix}{k}`))?.log).toBe(""); // marked: no block since
    expect((await set.limit("k")).allowed).toBe(true);
    expect((await row(`${prefix}{k}`))?.log).toBe(""); // the general procedure keeps the mark
    expect((await set.limit("k")).allowed).toBe(false); // blocks the key for 2 h
    expect((await row(`${prefix}{k}`))?.log).toBeNull();
    const blocked = await one.limit("k");
    expect(blocked.allowed).toBe(false);
    expect(blocked.retryAfterMs).toBeGreaterThan(7_000_000);
    // A single policy's own denial blocks too, and its next decision reads the block.
    const own = limiterOf(fixedWindow({ limit: 1, window: "1h", block: "2h" }), uniquePrefix());
    expect((await own.limit("j")).allowed).toBe(true);
    expect((await own.limit("j")).allowed).toBe(false);
    expect((await own.limit("j")).retryAfterMs).toBeGreaterThan(7_000_000);
    // Unblocked: the next decision reads no block, charges and marks the row again.
    await one.unblock("k");
    expect((await one.limit("k")).allowed).toBe(true);
    expect((await row(`${prefix}{k}`))?.log).toBe("");
  });

  it.each(KINDS)("%s: 40 callers racing on a new key are each counted once", async (_, __, policy) => {
    const prefix = uniquePrefix();
    const limiter = limiterOf(policy(25), prefix);
    // Every connection of the pool open first, so that the callers reach the server together.
    await Promise.all(Array.from({ length: 8 }, () => pool.query("SELECT SLEEP(0.05)")));
    for (let key = 0; key < 5; key++) {
      const decisions = await Promise.all(Array.from({ length: 40 }, () => limiter.limit(`race${key}`)));
      expect(decisions.filter((d) => d.allowed)).toHaveLength(25);
    }
  });
});
