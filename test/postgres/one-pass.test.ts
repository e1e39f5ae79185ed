/**
 * One counter policy's charge: one statement, no function call, for admissions, denials and a
 * block in force (the functions only for what the statement leaves to them); an admission writes
 * the row once, a denial writes its numbers back unchanged, a peek writes nothing, a set that
 * blocks still starts its block at a charging denial (the general path's work), and a token
 * bucket's admissions update its row in place.
 */
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { createRateLimiter, fixedWindow, slidingWindow, tokenBucket } from "../../packages/core/src/index.ts";
import { postgresStore } from "../../packages/postgres/src/index.ts";
import { uniquePrefix } from "../stores/store-contract.ts";
import { postgresUnavailable } from "../support/postgres-server.ts";
import { type PostgresHarness, postgresHarness } from "./harness.ts";

const unavailable = await postgresUnavailable();
if (unavailable !== undefined) console.log(unavailable);

describe.skipIf(unavailable !== undefined)("postgresStore, one policy in one pass", () => {
  let h: PostgresHarness;
  let pool: pg.Pool;
  beforeAll(async () => {
    h = await postgresHarness("pg");
    pool = new pg.Pool({ ...h.db.connection, max: 2 });
    pool.on("error", () => undefined);
  });
  afterAll(async () => {
    await pool?.end();
    await h?.close();
  });

  /** The row's version (xmin) and numbers: a write changes the version. */
  const row = async (prefix: string, id: string): Promise<{ xmin: string; nums: number[] } | undefined> =>
    (await h.query<{ xmin: string; nums: number[] }>(
      "SELECT xmin::text AS xmin, ARRAY[num1, num2, num3] AS nums FROM floodgate.limits WHERE key = $1 AND nums IS NULL",
      [`${prefix}{${id}}`],
    ))[0];

  for (
    const [kind, policy] of [
      ["fixed window", () => fixedWindow({ limit: 2, window: "1h" })],
      ["sliding window", () => slidingWindow({ limit: 2, window: "1h" })],
      ["token bucket", () => tokenBucket({ capacity: 2, refillRate: 1 / 3600 })],
    ] as const
  ) {
    it(`${kind}: admissions write the row, a denial writes its numbers back unchanged, a peek does not write`, async () => {
      const prefix = uniquePrefix();
      const limiter = createRateLimiter({ policy: policy(), store: postgresStore({ client: pool }), prefix, resilience: false });
      expect((await limiter.limit("a")).allowed).toBe(true); // a new row: inserted by the upsert
      const first = await row(prefix, "a");
      const second = await limiter.limit("a"); // the row exists: updated in place
      expect(second.allowed).toBe(true);
      expect(second.remaining).toBe(0);
      const charged = await row(prefix, "a");
      expect(charged!.xmin).not.toBe(first!.xmin);
      const denied = await limiter.limit("a");
      expect(denied.allowed).toBe(false);
      expect(denied.retryAfterMs).toBeGreaterThan(0);
      const after = await row(prefix, "a");
      expect(after!.nums).toEqual(charged!.nums);
      const peeked = await limiter.peek("a");
      expect(peeked.allowed).toBe(false);
      expect(await row(prefix, "a")).toEqual(after);
    });
  }

  it("a block in force denies a charge the policy would admit, and charges nothing", async () => {
    const prefix = uniquePrefix();
    const limiter = createRateLimiter({
      policy: fixedWindow({ limit: 5, window: "1h" }),
      store: postgresStore({ client: pool }),
      prefix,
      resilience: false,
    });
    await limiter.limit("b");
    await limiter.block("b", "1h");
    const before = await row(prefix, "b");
    const blocked = await limiter.limit("b");
    expect(blocked.allowed).toBe(false);
    expect((await row(prefix, "b"))!.nums).toEqual(before!.nums);
    await limiter.unblock("b");
    const after = await limiter.limit("b");
    expect(after.allowed).toBe(true);
    expect(after.remaining).toBe(3);
  });

  it("a policy with a block starts it at a charging denial", async () => {
    const prefix = uniquePrefix();
    const limiter = createRateLimiter({
      policy: fixedWindow({ limit: 1, window: "1h", block: "2h" }),
      store: postgresStore({ client: pool }),
      prefix,
      resilience: false,
    });
    expect((await limiter.limit("c")).allowed).toBe(true);
    const denied = await limiter.limit("c");
    expect(denied.allowed).toBe(false);
    const [found] = await h.query<{ blocked: number }>(
      "SELECT blocked_until_us - extract(epoch FROM clock_timestamp()) * 1000000 AS blocked FROM floodgate.limits WHERE key = $1",
      [`${prefix}{c}`],
    );
    expect(Number(found?.blocked)).toBeGreaterThan(3_600_000_000);
  });

  it("a token bucket's expiry moves once a minute, so its admissions update the row in place (HOT)", async () => {
    // A connection of its own: it sends its statistics when it closes.
    const client = new pg.Client(h.db.connection);
    client.on("error", () => undefined);
    await client.connect();
    onTestFinished(() => client.end().catch(() => undefined));
    const store = postgresStore({ client, clock: "local", table: "hotcheck" });
    await store.migrate();
    const prefix = uniquePrefix();
    const minute = Math.floor(Date.now() / 60_000) * 60_000;
    let now = minute + 10_000;
    const limiter = createRateLimiter({
      policy: tokenBucket({ capacity: 100, refillRate: 10 }),
      store,
      prefix,
      clock: () => now,
      resilience: false,
    });
    const state = async () =>
      (await h.query<{ num1: number; expires_at_us: number }>("SELECT num1, expires_at_us FROM floodgate.hotcheck WHERE key = $1", [
        `${prefix}{k}`,
      ]))[0]!;
    const updates = async () =>
      (await h.query<{ upd: string; hot: string }>(
        "SELECT n_tup_upd::text AS upd, n_tup_hot_upd::text AS hot FROM pg_stat_user_tables WHERE schemaname = 'floodgate' AND relname = 'hotcheck'",
      ))[0]!;
    const before = await updates();
    for (let i = 0; i < 20; i++) {
      expect((await limiter.limit("k")).allowed).toBe(true);
      const row = await state();
      // The full-again time rounded up to the minute: never before it, under a minute after.
      expect(row.expires_at_us).toBe((minute + 60_000) * 1000);
      expect(row.expires_at_us).toBeGreaterThanOrEqual(row.num1);
      now += 100;
    }
    // Past the minute: the expiry moves to the next one.
    now = minute + 65_000;
    expect((await limiter.limit("k")).allowed).toBe(true);
    expect((await state()).expires_at_us).toBe((minute + 120_000) * 1000);
    // The 19 updates within the minute were HOT (a backend sends its statistics as it exits).
    await client.end().catch(() => undefined);
    let after = await updates();
    for (let waited = 0; Number(after.upd) - Number(before.upd) < 20 && waited < 10_000; waited += 100) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      after = await updates();
    }
    expect(Number(after.upd) - Number(before.upd)).toBe(20);
    expect(Number(after.hot) - Number(before.hot)).toBeGreaterThanOrEqual(19);
  });

  it("admissions, denials and a block in force take the statement alone: no function is called", async () => {
    const store = postgresStore({ client: pool, schema: "direct_only", sweepEvery: 0 });
    await store.migrate();
    // Without the charge and consume functions, only what the statement decides can succeed.
    await h.query(
      "DROP FUNCTION direct_only.limits_charge_t, direct_only.limits_charge_f, direct_only.limits_charge_s, direct_only.limits_consume",
    );
    for (
      const policy of [
        fixedWindow({ limit: 2, window: "1h" }),
        slidingWindow({ limit: 2, window: "1h" }),
        tokenBucket({ capacity: 2, refillRate: 1 / 3600 }),
      ]
    ) {
      const limiter = createRateLimiter({ policy, store, prefix: uniquePrefix(), resilience: false });
      expect((await limiter.limit("d")).allowed).toBe(true);
      expect((await limiter.limit("d")).allowed).toBe(true);
      const denied = await limiter.limit("d");
      expect(denied.allowed).toBe(false);
      expect(denied.retryAfterMs).toBeGreaterThan(60_000);
      await limiter.block("e", "2h"); // the admin function, kept
      const blocked = await limiter.limit("e");
      expect(blocked.allowed).toBe(false);
      expect(blocked.retryAfterMs).toBeGreaterThan(3_600_000);
    }
    // A set that blocks is charged by the charge function (its denial starts the block).
    const blocking = createRateLimiter({
      policy: fixedWindow({ limit: 1, window: "1h", block: "2h" }),
      store,
      prefix: uniquePrefix(),
      resilience: false,
    });
    await expect(blocking.limit("f")).rejects.toThrow(/charge_f/);
  });
});
