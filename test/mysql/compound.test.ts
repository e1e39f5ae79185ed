/**
 * The MySQL store's compound step (`consumeMany`, one CALL of `<table>_v1_consume_many`): it
 * answers as the memory store's step does; many concurrent compound decisions naming their keys in
 * opposite orders admit exactly the limit in every dimension, with no error; a refusal charges no
 * other pair; a decision is one statement; an installation migrated before the procedure existed
 * is told to migrate, and migrate() adds it.
 */
import { afterAll, describe, expect, it } from "vitest";
import { createCompoundLimiter, createRateLimiter, fixedWindow, type RateLimitStore } from "../../packages/core/src/index.ts";
import { mysqlStore } from "../../packages/mysql/src/index.ts";
import { clearOfHourBoundary, uniquePrefix } from "../stores/store-contract.ts";
import { expectLikeMemory, raceCompound } from "../compound/store-steps.ts";
import { type MysqlHarness, mysqlHarness } from "./harness.ts";

const h: MysqlHarness | undefined = await mysqlHarness();

describe.skipIf(h === undefined)("mysqlStore consumeMany", () => {
  afterAll(() => h?.close());

  it("answers pair by pair as the memory store's compound step, blocks and logs included", async () => {
    await expectLikeMemory(() => h!.store("local"), 20);
  }, 180_000);

  it("many concurrent compound decisions in opposite orders: exactly the limits, no error", async () => {
    await clearOfHourBoundary(60_000);
    const store = mysqlStore({ client: h!.db.pool({ connectionLimit: 16 }), database: h!.db.database, sweepEvery: 0 });
    const { paths } = await raceCompound(store, { callers: 16, calls: 30, orgLimit: 100, userLimit: 5 });
    expect([...paths]).toEqual(["store"]);
  }, 180_000);

  it("a refused step charges no other pair", async () => {
    const store = h!.store("local");
    const prefix = uniquePrefix();
    const full = { prefix: `${prefix}a:`, policies: [fixedWindow({ limit: 1, window: "1h" })] };
    const fresh = { prefix: `${prefix}b:`, policies: [fixedWindow({ limit: 5, window: "1h" })] };
    const t = 1_700_000_000_000;
    await store.consume(full, "x", 1, t);
    const refused = await store.consumeMany([{ set: fresh, key: "y" }, { set: full, key: "x" }], 1, t);
    expect(refused.map((r) => r[0])).toEqual([1, 0]);
    expect((await store.peek(fresh, "y", t))[2]).toBe(5);
  });

  it("keys of any script charge the rows their single-key calls read", async () => {
    const store = h!.store("local");
    const prefix = uniquePrefix();
    const a = { prefix: `${prefix}a:`, policies: [fixedWindow({ limit: 5, window: "1h" })] };
    const b = { prefix: `${prefix}b:`, policies: [fixedWindow({ limit: 5, window: "1h" }), fixedWindow({ limit: 9, window: "1d" })] };
    const t = 1_700_000_000_000;
    const keys = ["日本語のキー😀", "x,y;z}%{"];
    const results = await store.consumeMany([{ set: a, key: keys[0]! }, { set: b, key: keys[1]! }], 2, t);
    expect(results.map((r) => r[0])).toEqual([1, 1]);
    expect((await store.peek(a, keys[0]!, t))[2]).toBe(3);
    expect([(await store.peek(b, keys[1]!, t))[2], (await store.peek(b, keys[1]!, t))[6]]).toEqual([3, 7]);
  });

  it("one statement per compound decision, where the ordered path sends one per dimension", async () => {
    const pool = h!.db.pool({ connectionLimit: 2 });
    const statements: string[] = [];
    const counted = {
      query: (sql: string, values?: unknown) => {
        statements.push(sql);
        return pool.query(sql, values as never[]);
      },
    };
    const store = mysqlStore({ client: counted, database: h!.db.database, sweepEvery: 0 });
    const prefix = uniquePrefix();
    const dims = (s: RateLimitStore) =>
      Object.fromEntries(
        ["a", "b", "c", "d"].map((
          d,
        ) => [d, createRateLimiter({ policy: fixedWindow({ limit: 2, window: "1h" }), store: s, prefix: `${prefix}${d}:` })]),
      );
    const keys = { a: "1", b: "2", c: "3", d: "4" };
    const native = createCompoundLimiter({ dimensions: dims(store) });
    expect(native.path).toBe("store");
    expect((await native.limit(keys)).allowed).toBe(true);
    expect(statements).toHaveLength(1);
    expect(statements[0]).toContain("_consume_many`(");
    const ordered = createCompoundLimiter({ dimensions: dims(withoutCompoundStep(store)) });
    expect(ordered.path).toBe("ordered");
    statements.length = 0;
    expect((await ordered.limit(keys)).allowed).toBe(true);
    expect(statements).toHaveLength(4);
    statements.length = 0;
    expect((await native.limit(keys)).allowed).toBe(false);
    expect(statements).toHaveLength(1);
  });

  it("without the procedure (migrated by an earlier version) the error names migrate(), which adds it", async () => {
    const pool = h!.db.pool({ connectionLimit: 2 });
    const store = mysqlStore({ client: pool, database: h!.db.database, table: "older" });
    await store.migrate();
    await pool.query(`DROP PROCEDURE \`${h!.db.database}\`.\`older_v1_consume_many\``);
    const set = { prefix: uniquePrefix(), policies: [fixedWindow({ limit: 1, window: "1h" })] };
    await expect(store.consumeMany([{ set, key: "a" }, { set, key: "b" }], 1, Date.now())).rejects.toThrow(/migrate\(\)/);
    await store.migrate();
    const results = await store.consumeMany([{ set, key: "a" }, { set, key: "b" }], 1, Date.now());
    expect(results.map((r) => r[0])).toEqual([1, 1]);
  });
});

/** The same store without its compound step: a compound limiter over it takes the ordered path. */
function withoutCompoundStep(store: RateLimitStore): RateLimitStore {
  return new Proxy(store, {
    get(target, name) {
      if (name === "consumeMany") return undefined;
      const value = Reflect.get(target, name, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}
