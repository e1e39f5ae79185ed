/**
 * Edge stores side by side, in one run (npm run bench:edge): on one miniflare (workerd, SQLite
 * Durable Objects), Floodgate's durableObjectStore in exact and in leased mode and
 * hono-rate-limiter's Durable Objects store, each behind its Hono middleware with a fixed window
 * of 1,000 per hour, on one hot key: decisions/s inside the Worker, admissions,
 * and DO requests per 1,000 decisions (`--many-keys` adds 10,000 keys; see below). Then
 * denoKvStore on Deno.openKv() (bench/edge/deno-kv.ts):
 * commits and retries per 1,000 decisions at 1, 10 and 100 concurrent callers.
 *   npm run build && npm run bench:edge
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Miniflare } from "miniflare";
import { bundle, requireBuilt, ROOT } from "../test/runtimes/support.ts";

requireBuilt(["core", "hono", "cloudflare"]);
const built = await bundle("bench/edge/worker.ts", {
  format: "esm",
  conditions: ["workerd", "worker", "browser", "import", "default"],
  external: ["cloudflare:workers"],
});
// On disk: held in memory, the objects' SQLite databases fail with SQLITE_NOMEM past a few thousand keys.
const persist = mkdtempSync(join(tmpdir(), "floodgate-bench-do-"));
const mf = new Miniflare({
  durableObjectsPersist: persist,
  modules: true,
  script: built.code,
  compatibilityDate: "2025-09-01",
  durableObjects: {
    FLOODGATE: { className: "RateLimiterObject", useSQLite: true },
    // hono-rate-limiter's object uses the key-value storage API: KV-backed, as its docs declare it.
    HRL: { className: "DurableObjectRateLimiter" },
  },
});
await mf.ready;

const rows: Record<string, unknown>[] = [];
const VARIANTS = ["floodgate-exact", "floodgate-leased", "hono-rate-limiter"] as const;
const SCENARIOS = [
  { name: "hot key", decisions: 2000, keys: 1, concurrency: 10 },
  // Opt-in: past a few thousand SQLite-backed objects, workerd under miniflare fails calls with
  // SQLITE_NOMEM (in memory and on disk alike), and the middlewares then fail open.
  ...(process.argv.includes("--many-keys")
    ? [{ name: "10,000 keys", decisions: 10_000, keys: 10_000, concurrency: 50, shards: undefined }]
    : []),
];
let run = 0;
for (const s of SCENARIOS) {
  for (const variant of VARIANTS) {
    const reply = await mf.dispatchFetch("http://bench.test/", {
      method: "POST",
      body: JSON.stringify({
        variant,
        decisions: s.decisions,
        keys: s.keys,
        concurrency: s.concurrency,
        limit: 1000,
        prefix: `b${run++}:`,
      }),
    });
    const r = await reply.json() as { admitted: number; ms: number; requests: number; statuses: Record<string, number> };
    const row = {
      scenario: s.name,
      variant,
      decisions: s.decisions,
      admitted: r.admitted,
      perSecond: Math.round((s.decisions / r.ms) * 1000),
      doRequestsPer1000: Math.round((r.requests / s.decisions) * 1000 * 10) / 10,
    };
    rows.push(row);
    console.log(JSON.stringify({ ...row, statuses: r.statuses }));
  }
}
await mf.dispose();

const deno = spawnSync(`${ROOT}/node_modules/.bin/deno`, ["run", "-A", "--no-check", "--unstable-kv", "bench/edge/deno-kv.ts"], {
  cwd: ROOT,
  encoding: "utf8",
});
if (deno.status !== 0) throw new Error(`bench/edge/deno-kv.ts failed: ${deno.stderr}`);
const kvRows = deno.stdout.trim().split("\n").map((line) => JSON.parse(line));
for (const r of kvRows) console.log(JSON.stringify(r));

const lines = [
  "| scenario | store | decisions | admitted | decisions/s | DO requests per 1,000 decisions |",
  "| --- | --- | ---: | ---: | ---: | ---: |",
  ...rows.map((r) => `| ${r.scenario} | ${r.variant} | ${r.decisions} | ${r.admitted} | ${r.perSecond} | ${r.doRequestsPer1000} |`),
  "",
  "| keys | mode | callers | decisions | admitted | decisions/s | commits per 1,000 | retries per 1,000 | timeouts |",
  "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
  ...kvRows.map((r) =>
    `| ${r.keys} | ${r.mode} | ${r.callers} | ${r.decisions} | ${r.admitted} | ${Math.round((r.decisions / r.ms) * 1000)} | ${
      Math.round((r.commits / r.decisions) * 1000)
    } | ${Math.round((r.retries / r.decisions) * 1000)} | ${r.timeouts} |`
  ),
];
console.log(`\n${lines.join("\n")}`);
writeFileSync(`${ROOT}/.tmp/bench-edge.md`, `${lines.join("\n")}\n`);
