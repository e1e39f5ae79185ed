/**
 * The Deno KV half of bench/edge.ts, run by the deno binary on Deno.openKv() (local backend, one
 * database file per scenario): decisions/s, commits and retries per 1,000 decisions for exact and
 * leased mode at 1, 10 and 100 concurrent callers on one hot key, and on keys seen once each. Prints one
 * JSON line per scenario.
 */
import { createRateLimiter, fixedWindow } from "../../packages/core/src/index.ts";
import { denoKvStore } from "../../packages/deno-kv/src/index.ts";

declare const Deno: {
  openKv(path?: string): Promise<import("../../packages/deno-kv/src/index.ts").KvDatabase & { close(): void }>;
  makeTempDirSync(): string;
};

const DECISIONS = 2000;
const LIMIT = 1000;

async function scenario(mode: "exact" | "leased", callers: number, keys: number): Promise<void> {
  const kv = await Deno.openKv(`${Deno.makeTempDirSync()}/kv.sqlite3`);
  const store = denoKvStore({ kv, maxAttempts: 1000, timeoutMs: 60_000 });
  const limiter = createRateLimiter({ policy: fixedWindow({ limit: LIMIT, window: "1h" }), store, resilience: false, mode });
  let next = 0;
  let admitted = 0;
  const started = performance.now();
  await Promise.all(Array.from({ length: callers }, async () => {
    while (next < DECISIONS) {
      const i = next++;
      const d = await limiter.limit(`k${i % keys}`);
      if (d.allowed) admitted++;
      await d.pending;
    }
  }));
  const ms = performance.now() - started;
  await limiter.flush();
  const { commits, retries, timeouts } = store.stats();
  console.log(JSON.stringify({ store: "deno-kv", mode, callers, keys, decisions: DECISIONS, admitted, ms, commits, retries, timeouts }));
  kv.close();
}

for (const keys of [1, DECISIONS]) {
  for (const callers of [1, 10, 100]) {
    for (const mode of ["exact", "leased"] as const) await scenario(mode, callers, keys);
  }
}
