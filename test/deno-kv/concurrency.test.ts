// Cross-client exactness on Deno KV's local backend: 4 deno processes sharing one database file,
// 250 concurrent decisions each on one key (1,000 in all), limit 100: exactly 100 admitted for
// every rate kind and a set of several policies. In one process, 250 concurrent callers too
// (decided together, one commit per round), and the bounds of a key contended by other writers:
// retries stop at `maxAttempts` or `timeoutMs` with STORE_TIMEOUT, and never admit too many.
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
      // Each process decided its 250 calls in rounds: far fewer commits than calls.
      for (const r of results) expect(r.commits).toBeLessThan(250);
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

  it("callers of one store never race: a round of concurrent calls on a key is one commit", async () => {
    const kv = await openKv();
    try {
      const store = denoKvStore({ kv });
      const limiter = createRateLimiter({ policy: policySet("fixed-window", 100), store, prefix: uniquePrefix(), resilience: false });
      const decisions = await Promise.all(Array.from({ length: 250 }, () => limiter.limit("hot")));
      expect(decisions.filter((d) => d.allowed)).toHaveLength(100);
      expect(store.stats().retries).toBe(0);
      expect(store.stats().commits).toBeLessThan(10);
    } finally {
      kv.close();
    }
  });

  it("a key contended by other writers: bounded retries end in STORE_TIMEOUT, never past the deadline, and nothing over-admits", async () => {
    const path = databasePath();
    // Four connections to one database: four writers whose commits race, as four processes' would.
    const connections = await Promise.all(Array.from({ length: 4 }, () => openKv(path)));
    try {
      const stores = connections.map((kv) => denoKvStore({ kv, maxAttempts: 2, timeoutMs: 200 }));
      const prefix = uniquePrefix();
      const limiters = stores.map((store) =>
        createRateLimiter({ policy: policySet("fixed-window", 1000), store, prefix, resilience: false })
      );
      const started = Date.now();
      const outcomes = await Promise.all(
        Array.from({ length: 400 }, async (_, i) => {
          const at = Date.now();
          try {
            await limiters[i % 4]!.limit("hot");
            return "admitted";
          } catch (error) {
            expect(error).toBeInstanceOf(FloodgateError);
            expect((error as FloodgateError).code).toBe("STORE_TIMEOUT");
            // Given up within its 200 ms and the time of the commit it was waiting on.
            expect(Date.now() - at).toBeLessThan(2_000);
            return "timeout";
          }
        }),
      );
      const timeouts = outcomes.filter((o) => o === "timeout").length;
      const admitted = outcomes.filter((o) => o === "admitted").length;
      const stats = stores.map((s) => s.stats());
      expect(stats.reduce((n, s) => n + s.retries, 0)).toBeGreaterThan(0);
      expect(stats.reduce((n, s) => n + s.timeouts, 0)).toBe(timeouts);
      expect(Date.now() - started).toBeLessThan(20_000);
      // What was admitted is exactly what was charged: a call that timed out charged nothing.
      expect((await limiters[0]!.peek("hot")).remaining).toBe(1000 - admitted);
    } finally {
      for (const kv of connections) kv.close();
    }
  });

  it("leased mode takes a hot key off the commit path: a commit per lease, not per decision", async () => {
    const kv = await openKv();
    try {
      const exactStore = denoKvStore({ kv });
      const leasedStore = denoKvStore({ kv });
      const policy = policySet("fixed-window", 100_000);
      const exact = createRateLimiter({ policy, store: exactStore, prefix: uniquePrefix(), resilience: false });
      const leased = createRateLimiter({ policy, store: leasedStore, prefix: uniquePrefix(), resilience: false, mode: "leased" });
      for (const limiter of [exact, leased]) {
        for (let i = 0; i < 200; i++) {
          const d = await limiter.limit("hot");
          expect(d.allowed).toBe(true);
          await d.pending;
        }
      }
      expect(exactStore.stats().commits).toBe(200);
      expect(leasedStore.stats().commits).toBeLessThan(40);
    } finally {
      kv.close();
    }
  });
});
