// Cross-client exactness on Deno KV's local backend: 4 deno processes sharing one database file,
// 250 concurrent decisions each on one key (1,000 in all), limit 100: exactly 100 admitted for
// every rate kind and a set of several policies. In one process, 250 concurrent callers too,
// and the bounds of a contended key: retries stop at `maxAttempts` or `timeoutMs` with
// STORE_TIMEOUT, never past it, and never admit too many.
//   npx vitest run test/deno-kv/concurrency.test.ts
import { spawn } from "node:child_process";
import { describe, expect, it } from "vitest";
import { createRateLimiter, FloodgateError } from "../../packages/core/src/index.ts";
import { denoKvStore } from "../../packages/deno-kv/src/index.ts";
import { uniquePrefix } from "../stores/store-contract.ts";
import { policySet, SETS } from "./sets.ts";
import { databasePath, openKv, runtime } from "./support.ts";

const DENO = new URL("../../node_modules/.bin/deno", import.meta.url).pathname;
const CLIENT = new URL("./client-process.ts", import.meta.url).pathname;

/** Runs one client process; resolves with what it printed. */
function client(path: string, set: string, calls: number, prefix: string): Promise<{ admitted: number; commits: number; retries: number }> {
  return new Promise((resolve, reject) => {
    const child = spawn(DENO, ["run", "-A", "--no-check", "--unstable-kv", CLIENT, path, set, String(calls), prefix], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    child.stdout.on("data", (chunk) => (out += chunk));
    child.stderr.on("data", (chunk) => (err += chunk));
    child.on("error", reject);
    child.on("close", (code) => {
      if (code === 0) resolve(JSON.parse(out.trim().split("\n").pop()!));
      else reject(new Error(`client process exited with ${code}: ${err}`));
    });
  });
}

describe(`denoKvStore (${runtime}): exactness under concurrency`, () => {
  for (const set of SETS) {
    it(`4 deno processes on one database, 250 concurrent calls each, ${set}: exactly 100 admitted`, async () => {
      const path = databasePath();
      const prefix = uniquePrefix();
      const results = await Promise.all(Array.from({ length: 4 }, () => client(path, set, 250, prefix)));
      expect(results.reduce((sum, r) => sum + r.admitted, 0)).toBe(100);
      // The processes did race: commits were refused and decided again.
      expect(results.reduce((sum, r) => sum + r.retries, 0)).toBeGreaterThan(0);
    }, 180_000);

    it(`one process, 250 concurrent callers, ${set}: exactly 100 admitted`, async () => {
      const kv = await openKv();
      try {
        const store = denoKvStore({ kv, maxAttempts: 1000, timeoutMs: 120_000 });
        const limiter = createRateLimiter({ policy: policySet(set, 100), store, prefix: uniquePrefix(), resilience: false });
        const decisions = await Promise.all(Array.from({ length: 250 }, () => limiter.limit("hot")));
        expect(decisions.filter((d) => d.allowed)).toHaveLength(100);
        expect((await limiter.peek("hot")).remaining).toBe(0);
      } finally {
        kv.close();
      }
    }, 120_000);
  }

  it("a contended key: bounded retries end in STORE_TIMEOUT within the deadline, and nothing over-admits", async () => {
    const kv = await openKv();
    try {
      const store = denoKvStore({ kv, maxAttempts: 3, timeoutMs: 300 });
      const limiter = createRateLimiter({ policy: policySet("fixed-window", 100), store, prefix: uniquePrefix(), resilience: false });
      const started = Date.now();
      const outcomes = await Promise.all(
        Array.from({ length: 100 }, async () => {
          try {
            return (await limiter.limit("hot")).allowed ? "admitted" : "denied";
          } catch (error) {
            expect(error).toBeInstanceOf(FloodgateError);
            expect((error as FloodgateError).code).toBe("STORE_TIMEOUT");
            return "timeout";
          }
        }),
      );
      const timeouts = outcomes.filter((o) => o === "timeout").length;
      const admitted = outcomes.filter((o) => o === "admitted").length;
      expect(timeouts).toBeGreaterThan(0);
      expect(admitted + timeouts).toBe(100);
      expect(store.stats().timeouts).toBe(timeouts);
      // Each caller gave up after at most 3 commits, inside its 300 ms (and a commit's time).
      expect(store.stats().commits).toBeLessThanOrEqual(3 * 100);
      expect(Date.now() - started).toBeLessThan(5_000);
      // What was admitted is exactly what was charged.
      expect((await limiter.peek("hot")).remaining).toBe(100 - admitted);
    } finally {
      kv.close();
    }
  });

  it("leased mode takes a hot key off the contended path: fewer commits than decisions, the same admissions", async () => {
    const kv = await openKv();
    try {
      const exactStore = denoKvStore({ kv, maxAttempts: 1000, timeoutMs: 60_000 });
      const leasedStore = denoKvStore({ kv, maxAttempts: 1000, timeoutMs: 60_000 });
      const policy = policySet("fixed-window", 100_000);
      const exact = createRateLimiter({ policy, store: exactStore, prefix: uniquePrefix(), resilience: false });
      const leased = createRateLimiter({ policy, store: leasedStore, prefix: uniquePrefix(), resilience: false, mode: "leased" });
      for (const limiter of [exact, leased]) {
        for (let round = 0; round < 20; round++) {
          const decisions = await Promise.all(Array.from({ length: 10 }, () => limiter.limit("hot")));
          expect(decisions.every((d) => d.allowed)).toBe(true);
          await Promise.all(decisions.map((d) => d.pending));
        }
      }
      expect(exactStore.stats().commits).toBeGreaterThanOrEqual(200);
      expect(leasedStore.stats().commits).toBeLessThan(40);
      expect(leasedStore.stats().retries).toBeLessThan(exactStore.stats().retries + 1);
    } finally {
      kv.close();
    }
  });
});
