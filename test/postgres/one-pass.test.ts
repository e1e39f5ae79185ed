/**
 * The consume function's one-pass path (one counter policy on an existing row): an admission
 * writes the row once, a denial and a peek write nothing, a block in force still denies, and a
 * set that blocks still starts its block at a charging denial (the general path's work).
 */
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
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
    it(`${kind}: admissions write the row, a denial and a peek do not`, async () => {
      const prefix = uniquePrefix();
      const limiter = createRateLimiter({ policy: policy(), store: postgresStore({ client: pool }), prefix, resilience: false });
      expect((await limiter.limit("a")).allowed).toBe(true); // a new row: inserted by the upsert
      const first = await row(prefix, "a");
      const second = await limiter.limit("a"); // the row exists: one pass
      expect(second.allowed).toBe(true);
      expect(second.remaining).toBe(0);
      const charged = await row(prefix, "a");
      expect(charged!.xmin).not.toBe(first!.xmin);
      const denied = await limiter.limit("a");
      expect(denied.allowed).toBe(false);
      expect(denied.retryAfterMs).toBeGreaterThan(0);
      const peeked = await limiter.peek("a");
      expect(peeked.allowed).toBe(false);
      expect(await row(prefix, "a")).toEqual(charged);
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
});
