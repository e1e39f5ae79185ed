/**
 * The store's life in a database: an idempotent migration in a named schema (and the shipped SQL
 * file it matches), one clear FloodgateError for a missing migration, a wrong schema, a read-only
 * server or a role without privileges; rows that carry their expiry and go in sweeps; leased
 * mode end to end; Drizzle's client reused (no second pool); bad options.
 */
import { readFileSync } from "node:fs";
import { drizzle } from "drizzle-orm/node-postgres";
import { sql } from "drizzle-orm";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRateLimiter, fixedWindow, slidingLog, tokenBucket } from "../../packages/core/src/index.ts";
import { migrationSql, postgresStore } from "../../packages/postgres/src/index.ts";
import { uniquePrefix } from "../stores/store-contract.ts";
import { postgresUnavailable } from "../support/postgres-server.ts";
import { CLIENTS, type PostgresHarness, postgresHarness } from "./harness.ts";

const unavailable = await postgresUnavailable();
if (unavailable !== undefined) console.log(unavailable);

describe.skipIf(unavailable !== undefined)("postgresStore lifecycle", () => {
  let h: PostgresHarness;
  let pool: pg.Pool;
  beforeAll(async () => {
    h = await postgresHarness("pg");
    pool = new pg.Pool({ ...h.db.connection, max: 4 });
    pool.on("error", () => undefined);
  });
  afterAll(async () => {
    await pool?.end();
    await h?.close();
  });

  it("the shipped sql/migration.sql is migrationSql() with the defaults", () => {
    const shipped = readFileSync(new URL("../../packages/postgres/sql/migration.sql", import.meta.url), "utf8");
    expect(shipped, "regenerate it: write migrationSql() to packages/postgres/sql/migration.sql").toBe(migrationSql());
  });

  it("migrates idempotently into the schema and table named, and check() passes there", async () => {
    const store = postgresStore({ client: pool, schema: "rl_named", table: "buckets", unlogged: true });
    await store.migrate();
    await store.migrate();
    await store.check();
    const tables = await h.query<{ relname: string; relpersistence: string }>(
      "SELECT relname, relpersistence FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE nspname = 'rl_named' AND relkind = 'r' ORDER BY relname",
    );
    expect(tables).toEqual([{ relname: "buckets", relpersistence: "u" }, { relname: "buckets_ledger", relpersistence: "u" }]);
    const limiter = createRateLimiter({ policy: fixedWindow({ limit: 2, window: "1h" }), store, prefix: uniquePrefix() });
    expect((await limiter.limit("a")).remaining).toBe(1);
  });

  it("a missing migration or a wrong schema is one FloodgateError naming the fix", async () => {
    const store = postgresStore({ client: pool, schema: "never_migrated" });
    const limiter = createRateLimiter({ policy: fixedWindow({ limit: 2, window: "1h" }), store, resilience: false });
    for (const call of [() => limiter.limit("a"), () => store.check()]) {
      await expect(call()).rejects.toMatchObject({
        name: "FloodgateError",
        code: "STORE_ERROR",
        message: expect.stringContaining('missing in schema "never_migrated"'),
      });
    }
    await expect(limiter.limit("a")).rejects.toThrow("store.migrate()");
  });

  it("a read-only server and a role without privileges are named as such", async () => {
    const readOnly = new pg.Pool({ ...h.db.connection, max: 1, options: "-c default_transaction_read_only=on" });
    const store = postgresStore({ client: readOnly });
    await expect(store.check()).rejects.toThrow(/read-only .*Connect the store to the primary/);
    await readOnly.end();
    await h.query("DROP ROLE IF EXISTS fg_nobody_test");
    await h.query("CREATE ROLE fg_nobody_test LOGIN");
    const weak = new pg.Pool({ ...h.db.connection, user: "fg_nobody_test", max: 1 });
    try {
      const limiter = createRateLimiter({
        policy: fixedWindow({ limit: 2, window: "1h" }),
        store: postgresStore({ client: weak }),
        resilience: false,
      });
      await expect(limiter.limit("a")).rejects.toThrow(/lacks privileges.*GRANT|Grant it USAGE on schema "floodgate"/);
    } finally {
      await weak.end();
      await h.query("DROP OWNED BY fg_nobody_test");
      await h.query("DROP ROLE fg_nobody_test");
    }
  });

  it("every row carries its expiry; sweeps delete exactly the expired rows, piggy-backed or called", async () => {
    // Local clock 15 s behind real time: sweep() of a local-clock store reads Date.now().
    let now = Date.now() - 15_000;
    const store = postgresStore({ client: pool, clock: "local", sweepEvery: 0, table: "sweepme" });
    await store.migrate();
    const prefix = uniquePrefix();
    const limiter = createRateLimiter({ policy: slidingLog({ limit: 5, window: "10s" }), store, prefix, clock: () => now });
    for (let i = 0; i < 20; i++) await limiter.limit(`id${i}`);
    const rows = await h.query<{ key: string; expires_at_us: number }>("SELECT key, expires_at_us FROM floodgate.sweepme ORDER BY key");
    expect(rows).toHaveLength(20);
    for (const row of rows) expect(row.expires_at_us).toBe(Math.floor(now * 1000) + 10_000_000);
    now = Date.now();
    await limiter.limit("fresh"); // in its window for 10 s more
    expect(await store.sweep()).toBe(20);
    expect(await store.sweep()).toBe(0);
    // Piggy-backed: every charging call sweeps up to 3 expired rows, on the call's clock.
    const piggy = postgresStore({ client: pool, clock: "local", sweepEvery: 1, sweepBatch: 3, table: "sweepme" });
    const bound = createRateLimiter({ policy: fixedWindow({ limit: 5, window: "1s" }), store: piggy, prefix, clock: () => now });
    for (let i = 0; i < 5; i++) await bound.limit(`old${i}`);
    now += 2_000;
    await bound.limit("new");
    const left = (await h.query<{ key: string }>("SELECT key FROM floodgate.sweepme")).map((r) => r.key);
    expect(left).toHaveLength(4); // 2 of the 5 expired, the bound of one sweep being 3
    expect(left).toEqual(expect.arrayContaining([`${prefix}{new}`, `${prefix}{fresh}`]));
  });

  it("Drizzle over node-postgres: the store runs on the ORM's own pool (no second pool)", async () => {
    const db = drizzle({ client: pool });
    const store = postgresStore({ client: db.$client });
    const limiter = createRateLimiter({ policy: tokenBucket({ capacity: 3, refillRate: 1 }), store, prefix: uniquePrefix() });
    const before = pool.totalCount;
    await db.execute(sql`SELECT 1`);
    expect((await limiter.limit("u")).remaining).toBe(2);
    expect((await limiter.limit("u", { cost: 2 })).allowed).toBe(true);
    expect((await limiter.limit("u")).allowed).toBe(false);
    expect(pool.totalCount).toBeLessThanOrEqual(Math.max(before, 1) + 1);
    const [{ n }] = (await db.execute<{ n: number }>(sql`SELECT count(*)::int AS n FROM floodgate.limits`)).rows as [{ n: number }];
    expect(n).toBeGreaterThan(0);
  });

  it("identifiers of up to 1,024 characters of any script each have their own row", async () => {
    const limiter = createRateLimiter({
      policy: fixedWindow({ limit: 3, window: "1h" }),
      store: postgresStore({ client: pool }),
      prefix: uniquePrefix(),
    });
    const long = (seed: number): string =>
      Array.from({ length: 1024 }, (_, i) => String.fromCharCode(0x4e00 + ((i * 7919 + seed) % 20000))).join("");
    const [a, b] = [long(1), long(2)];
    expect((await limiter.limit(a, { cost: 2 })).remaining).toBe(1);
    expect((await limiter.limit(b)).remaining).toBe(2);
    expect((await limiter.peek(a)).remaining).toBe(1);
    await limiter.reset(a);
    expect((await limiter.peek(a)).remaining).toBe(3);
    expect((await limiter.peek(b)).remaining).toBe(2);
  });

  it("rejects bad options with the option named", () => {
    expect(() => postgresStore({ client: {} as never })).toThrow(/`client` must be a node-postgres Pool/);
    expect(() => postgresStore({ client: pool, schema: "Bad-Name" })).toThrow(/`schema` must be a lower-case SQL identifier/);
    expect(() => postgresStore({ client: pool, sweepEvery: -1 })).toThrow(/`sweepEvery`/);
    expect(() => postgresStore({ client: pool, clok: "local" } as never)).toThrow(/`clok`/);
  });
});

describe.skipIf(unavailable !== undefined).each(CLIENTS)("leased mode over postgresStore (%s)", (client) => {
  let h: PostgresHarness;
  beforeAll(async () => {
    h = await postgresHarness(client);
  });
  afterAll(async () => {
    await h?.close();
  });

  it('serves mode: "leased" with fewer store calls than decisions, never over the limit', async () => {
    const store = h.store("server");
    let calls = 0;
    const counted = new Proxy(store, {
      get(target, name, receiver) {
        const value = Reflect.get(target, name, receiver);
        if (name === "lease" || name === "consume") {
          return (...args: unknown[]) => (calls++, (value as (...a: unknown[]) => unknown).apply(target, args));
        }
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    const limiter = createRateLimiter({
      policy: fixedWindow({ limit: 1000, window: "1h" }),
      store: counted,
      prefix: uniquePrefix(),
      mode: "leased",
    });
    let allowed = 0;
    for (let i = 0; i < 1200; i++) if ((await limiter.limit("hot")).allowed) allowed++;
    expect(allowed).toBeLessThanOrEqual(1000);
    expect(allowed).toBeGreaterThan(900);
    expect(calls).toBeLessThan(300);
    console.log(`leased (${client}): ${calls} store calls for 1200 decisions, ${allowed} admitted`);
  });
});
