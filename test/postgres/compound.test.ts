/**
 * The PostgreSQL store's compound step (`consumeMany`, one call of `<table>_consume_many`): it
 * answers as the memory store's step does; many concurrent compound decisions naming their keys in
 * opposite orders admit exactly the limit in every dimension with no deadlock; a refusal leaves no
 * row behind for a key it did not charge; a decision is one statement; and an installation of the
 * previous schema version is brought up to date by migrate().
 */
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCompoundLimiter, createRateLimiter, fixedWindow } from "../../packages/core/src/index.ts";
import { postgresStore, SCHEMA_VERSION } from "../../packages/postgres/src/index.ts";
import { clearOfHourBoundary, uniquePrefix } from "../stores/store-contract.ts";
import { postgresUnavailable } from "../support/postgres-server.ts";
import { expectLikeMemory, raceCompound } from "../compound/store-steps.ts";
import { type PostgresHarness, postgresHarness } from "./harness.ts";

const unavailable = await postgresUnavailable();
if (unavailable !== undefined) console.log(unavailable);

describe.skipIf(unavailable !== undefined)("postgresStore consumeMany", () => {
  let h: PostgresHarness;
  let pool: pg.Pool;
  beforeAll(async () => {
    h = await postgresHarness("pg", 16);
    pool = new pg.Pool({ ...h.db.connection, max: 16 });
    pool.on("error", () => undefined);
  });
  afterAll(async () => {
    await pool?.end();
    await h?.close();
  });

  it("answers pair by pair as the memory store's compound step, blocks and logs included", async () => {
    await expectLikeMemory(() => h.store("local", { sweepEvery: 0 }));
  }, 120_000);

  it("many concurrent compound decisions in opposite orders: exactly the limits, no deadlock", async () => {
    await clearOfHourBoundary(60_000);
    const store = postgresStore({ client: pool, sweepEvery: 0 });
    const { paths } = await raceCompound(store, { callers: 16, calls: 30, orgLimit: 100, userLimit: 5 });
    expect([...paths]).toEqual(["store"]);
  }, 120_000);

  it("a refused step leaves no row for a key it did not charge, and charges no other pair", async () => {
    const store = h.store("local", { sweepEvery: 0 });
    const prefix = uniquePrefix();
    const full = { prefix: `${prefix}a:`, policies: [fixedWindow({ limit: 1, window: "1h" })] };
    const fresh = { prefix: `${prefix}b:`, policies: [fixedWindow({ limit: 5, window: "1h" })] };
    const t = 1_700_000_000_000;
    await store.consume(full, "x", 1, t);
    const refused = await store.consumeMany([{ set: fresh, key: "y" }, { set: full, key: "x" }], 1, t);
    expect(refused.map((r) => r[0])).toEqual([1, 0]);
    const rows = await h.query<{ key: string }>("SELECT key FROM floodgate.limits WHERE key LIKE $1", [`${prefix}%`]);
    expect(rows.map((r) => r.key)).toEqual([`${prefix}a:{x}`]);
    expect((await store.peek(fresh, "y", t))[2]).toBe(5);
  });

  it("keys of any script charge the rows their single-key calls read", async () => {
    const store = h.store("local", { sweepEvery: 0 });
    const prefix = uniquePrefix();
    const a = { prefix: `${prefix}a:`, policies: [fixedWindow({ limit: 5, window: "1h" })] };
    const b = { prefix: `${prefix}b:`, policies: [fixedWindow({ limit: 5, window: "1h" }), fixedWindow({ limit: 9, window: "1d" })] };
    const t = 1_700_000_000_000;
    const keys = ["日本語のキー😀", 'x,"y"\\z}{ '];
    const results = await store.consumeMany([{ set: a, key: keys[0]! }, { set: b, key: keys[1]! }], 2, t);
    expect(results.map((r) => r[0])).toEqual([1, 1]);
    expect((await store.peek(a, keys[0]!, t))[2]).toBe(3);
    expect([(await store.peek(b, keys[1]!, t))[2], (await store.peek(b, keys[1]!, t))[6]]).toEqual([3, 7]);
  });

  it("one statement per compound decision, where the ordered path sends one per dimension", async () => {
    const statements: string[] = [];
    const counted = {
      query: (config: { text: string }) => {
        statements.push(config.text);
        return pool.query(config as never);
      },
    };
    const store = postgresStore({ client: counted, sweepEvery: 0 });
    const prefix = uniquePrefix();
    const dims = Object.fromEntries(
      ["a", "b", "c", "d"].map((
        d,
      ) => [d, createRateLimiter({ policy: fixedWindow({ limit: 2, window: "1h" }), store, prefix: `${prefix}${d}:` })]),
    );
    const keys = { a: "1", b: "2", c: "3", d: "4" };
    const native = createCompoundLimiter({ dimensions: dims });
    expect(native.path).toBe("store");
    expect((await native.limit(keys)).allowed).toBe(true);
    expect(statements).toHaveLength(1);
    expect(statements[0]).toContain("_consume_many(");
    const ordered = createCompoundLimiter({
      dimensions: Object.fromEntries(
        Object.entries(dims).map(([d]) => [
          d,
          createRateLimiter({
            policy: fixedWindow({ limit: 2, window: "1h" }),
            store: { ...bindAll(store), consumeMany: undefined },
            prefix: `${prefix}${d}:`,
          }),
        ]),
      ),
    });
    expect(ordered.path).toBe("ordered");
    statements.length = 0;
    expect((await ordered.limit(keys)).allowed).toBe(true);
    expect(statements).toHaveLength(4);
    statements.length = 0;
    expect((await native.limit(keys)).allowed).toBe(false);
    expect(statements).toHaveLength(1);
  });

  it("migrate() brings an installation of schema version 1 up to date; check() names the upgrade before", async () => {
    const store = postgresStore({ client: pool, table: "upgraded" });
    await store.migrate();
    await h.query("DROP FUNCTION floodgate.upgraded_consume_many");
    await h.query("CREATE OR REPLACE FUNCTION floodgate.upgraded_version() RETURNS int LANGUAGE sql IMMUTABLE AS $fn$ SELECT 1 $fn$");
    await expect(store.check()).rejects.toThrow(new RegExp(`version 1 .*needs version ${SCHEMA_VERSION}.*store\\.migrate\\(\\)`));
    await store.migrate();
    await store.check();
    const set = { prefix: uniquePrefix(), policies: [fixedWindow({ limit: 1, window: "1h" })] };
    const results = await store.consumeMany([{ set, key: "a" }, { set, key: "b" }], 1, Date.now());
    expect(results.map((r) => r[0])).toEqual([1, 1]);
  });
});

/** A store's methods as own properties, bound to it (a copy without `consumeMany` decides on the ordered path). */
function bindAll<T extends object>(store: T): T {
  const out: Record<string, unknown> = {};
  for (let o: object | null = store; o !== null && o !== Object.prototype; o = Object.getPrototypeOf(o)) {
    for (const name of Object.getOwnPropertyNames(o)) {
      if (name in out || name === "constructor") continue;
      const value = (store as Record<string, unknown>)[name];
      out[name] = typeof value === "function" ? value.bind(store) : value;
    }
  }
  return out as T;
}
