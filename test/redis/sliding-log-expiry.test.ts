/**
 * A sliding log never blocks Redis when many entries age out at once: the script finds the first
 * entry still in the window by galloping then bisecting (LINDEX) and drops the rest with one
 * LTRIM, so one call's commands grow with the logarithm of the entries that expire, not with their
 * number (the former loop popped them one LPOP at a time: ~130 M instructions, 26–371 ms, for
 * 10,000). Counted with INFO commandstats, which Redis keeps per command, scripts' calls included.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRateLimiter, slidingLog } from "../../packages/core/src/index.ts";
import { uniquePrefix } from "../stores/store-contract.ts";
import { ioredisHarness, type RedisHarness } from "./harness.ts";

/** Calls and µs per command since the last CONFIG RESETSTAT. */
async function commandStats(h: RedisHarness): Promise<Record<string, { calls: number; usec: number }>> {
  const info = (await h.admin.info("commandstats")) as string;
  const stats: Record<string, { calls: number; usec: number }> = {};
  for (const m of info.matchAll(/^cmdstat_(\w+):calls=(\d+),usec=(\d+)/gm)) stats[m[1]!] = { calls: Number(m[2]), usec: Number(m[3]) };
  return stats;
}

describe("sliding log: 10,000 entries ageing out in one call", () => {
  let h: RedisHarness;
  beforeAll(async () => {
    h = await ioredisHarness();
  });
  afterAll(async () => {
    await h?.close();
  });

  it.each([10_000, 1_000, 3])("%s entries: O(log n) commands, one LTRIM, no LPOP; the decision exact", async (n) => {
    const T = 1_700_000_000_000;
    let now = T;
    const limiter = createRateLimiter({
      policy: slidingLog({ limit: n + 10, window: "1s" }),
      store: h.store("local", { denyCache: false }),
      prefix: uniquePrefix(),
      clock: () => now,
    });
    expect((await limiter.limit("k", { cost: n })).allowed).toBe(true);
    now = T + 500;
    expect((await limiter.limit("k")).allowed).toBe(true);
    // Every entry of T has left the window; the one of T + 500 has not.
    now = T + 1_000;
    await h.admin.config("RESETSTAT");
    const d = await limiter.limit("k", { cost: 2 });
    const stats = await commandStats(h);
    expect(d.allowed).toBe(true);
    expect(d.remaining).toBe(n + 10 - 3);
    expect(stats["lpop"]).toBeUndefined();
    expect(stats["ltrim"]?.calls).toBe(1);
    // First entry, then galloping and bisecting: at most 2 log2(n) + 2 reads of the list.
    expect(stats["lindex"]!.calls).toBeLessThanOrEqual(2 * Math.ceil(Math.log2(n)) + 2);
    const script = stats["evalsha"] ?? stats["eval"];
    console.log(
      `sliding log, ${n} entries ageing out: ${stats["lindex"]!.calls} LINDEX, 1 LTRIM, ${script!.usec} µs in Redis for the call`,
    );
    // Time inside Redis depends on the machine's load; the bound the call must keep is 1 ms.
    expect(script!.usec).toBeLessThan(10_000);
    // The state afterwards is exactly the log's: the entry of T + 500 and the two just charged.
    now = T + 1_499;
    expect((await limiter.peek("k")).remaining).toBe(n + 10 - 3);
    now = T + 1_500;
    expect((await limiter.peek("k")).remaining).toBe(n + 10 - 2);
  });
});
