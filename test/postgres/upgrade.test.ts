/**
 * Upgrading an installation of schema version 2 (its shipped migration, fixtures/migration-v2.sql)
 * to this version: migrate() keeps every row's counts (rows of the array layout are read as they
 * are, and a charge moves a counter policy's row to the plain columns); an instance of the old
 * version, calling the functions by position as its store does, and a new store decide on the
 * same rows without admitting more than the limit; and the old version's migration, run again
 * after the upgrade, fails instead of putting back functions that do not read the new rows.
 */
import { readFileSync } from "node:fs";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRateLimiter, fixedWindow, type Policy, slidingLog, slidingWindow, tokenBucket } from "../../packages/core/src/index.ts";
import { postgresStore, SCHEMA_VERSION } from "../../packages/postgres/src/index.ts";
import { clearOfHourBoundary } from "../stores/store-contract.ts";
import { postgresUnavailable } from "../support/postgres-server.ts";
import { type PostgresHarness, postgresHarness } from "./harness.ts";

const unavailable = await postgresUnavailable();
if (unavailable !== undefined) console.log(unavailable);

const V2 = readFileSync(new URL("./fixtures/migration-v2.sql", import.meta.url), "utf8").replace(/\bfloodgate\b/g, "upv2");
const HOUR_MS = 3_600_000;

/** Each policy under test: its kind's letter and the limit and parameter version 2's functions take. */
const POLICIES: readonly { name: string; kind: string; par: number; policy: () => Policy }[] = [
  { name: "token bucket", kind: "t", par: HOUR_MS * 1000, policy: () => tokenBucket({ capacity: 5, refillRate: 1 / 3600 }) },
  { name: "fixed window", kind: "f", par: HOUR_MS, policy: () => fixedWindow({ limit: 5, window: "1h" }) },
  { name: "sliding window", kind: "s", par: HOUR_MS, policy: () => slidingWindow({ limit: 5, window: "1h" }) },
  { name: "sliding log", kind: "l", par: HOUR_MS, policy: () => slidingLog({ limit: 5, window: "1h" }) },
];

describe.skipIf(unavailable !== undefined)("postgresStore: upgrade from schema version 2", () => {
  let h: PostgresHarness;
  let admin: pg.Client;
  let pool: pg.Pool;
  beforeAll(async () => {
    h = await postgresHarness("pg");
    admin = new pg.Client(h.db.connection);
    await admin.connect();
    admin.on("error", () => undefined);
    pool = new pg.Pool({ ...h.db.connection, max: 8 });
    pool.on("error", () => undefined);
  });
  afterAll(async () => {
    await admin?.end();
    await pool?.end();
    await h?.close();
  });

  /** A consume through the functions as version 2's store calls them (by position); answers whether it admitted. */
  const oldConsume = async (key: string, kind: string, par: number): Promise<boolean> => {
    const { rows } = await pool.query({
      text: "SELECT upv2.limits_consume($1::text, $2::text, $3::float8[], $4::float8[], NULL, 1, NULL, NULL, 0, 0) AS r",
      values: [key, kind, "{5}", `{${par}}`],
    });
    return (rows[0].r as number[])[0] === 1;
  };

  it("keeps the counts, blocks and all, decides beside an old instance, and refuses the old migration", async () => {
    await clearOfHourBoundary(60_000);
    await admin.query(V2);
    // State written by version 2: 3 of 5 used on each policy, and a block on another key.
    for (const p of POLICIES) for (let i = 0; i < 3; i++) expect(await oldConsume(`up:{${p.kind}}`, p.kind, p.par)).toBe(true);
    await pool.query("SELECT upv2.limits_admin('up:{blocked}', 'f', '{5}', $1::float8[], 'b', 3600000, NULL)", [`{${HOUR_MS}}`]);

    const store = postgresStore({ client: pool, schema: "upv2", sweepEvery: 0 });
    await expect(store.check()).rejects.toThrow(new RegExp(`version 2 .*needs version ${SCHEMA_VERSION}`));
    await store.migrate();
    await store.check();
    const { rows: columns } = await admin.query(
      "SELECT count(*)::int AS n FROM upv2.limits WHERE nums IS NOT NULL AND num1 IS NULL",
    );
    expect(columns[0].n).toBe(POLICIES.length + 1); // nothing rewritten

    for (const p of POLICIES) {
      const limiter = createRateLimiter({ policy: p.policy(), store, prefix: "up:", resilience: false });
      const fourth = await limiter.limit(p.kind);
      expect(fourth.allowed, p.name).toBe(true);
      expect(fourth.remaining, p.name).toBe(1);
      expect((await limiter.limit(p.kind)).allowed, p.name).toBe(true);
      const sixth = await limiter.limit(p.kind);
      expect(sixth.allowed, p.name).toBe(false);
      expect(sixth.remaining, p.name).toBe(0);
    }
    // The counter policies' rows moved to the plain columns; the log's stayed in nums and logs.
    const { rows: layout } = await admin.query("SELECT key, nums IS NULL AS plain FROM upv2.limits ORDER BY key");
    expect(layout).toEqual([
      { key: "up:{blocked}", plain: false },
      { key: "up:{f}", plain: true },
      { key: "up:{l}", plain: false },
      { key: "up:{s}", plain: true },
      { key: "up:{t}", plain: true },
    ]);
    const blocked = createRateLimiter({ policy: fixedWindow({ limit: 5, window: "1h" }), store, prefix: "up:", resilience: false });
    expect((await blocked.limit("blocked")).allowed).toBe(false);

    // An old instance beside a new one, on one key, concurrently: exactly the limit.
    for (const p of POLICIES.filter((q) => q.kind !== "l")) {
      const limiter = createRateLimiter({ policy: p.policy(), store, prefix: "up:", resilience: false });
      const calls = Array.from(
        { length: 16 },
        (_, i) => i % 2 === 0 ? oldConsume(`up:{both-${p.kind}}`, p.kind, p.par) : limiter.limit(`both-${p.kind}`).then((r) => r.allowed),
      );
      const admitted = (await Promise.all(calls)).filter(Boolean).length;
      expect(admitted, p.name).toBe(5);
    }

    // Version 2's migration run again fails as a whole: the functions stay this version's.
    await expect(admin.query(V2)).rejects.toThrow(/cannot change name of input parameter/);
    await admin.query("ROLLBACK");
    await store.check();
    const fixed = createRateLimiter({ policy: fixedWindow({ limit: 5, window: "1h" }), store, prefix: "up:", resilience: false });
    expect((await fixed.peek("f")).remaining).toBe(0);
  });
});
