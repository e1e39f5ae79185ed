/**
 * Edge stores side by side, in one run (npm run bench:edge): on one miniflare (workerd, SQLite
 * Durable Objects), Floodgate's durableObjectStore in exact and in leased mode, each bare and
 * behind withDenyCache, and hono-rate-limiter's Durable Objects store, each behind its Hono
 * middleware with a fixed window: decisions/s inside the Worker, admissions (in all and per key)
 * and DO requests per 1,000 decisions, on one hot key and on 10,000 keys (`--no-hot-key`,
 * `--no-many-keys` leave one out). Then denoKvStore on Deno.openKv() (bench/edge/deno-kv.ts):
 * commits and retries per 1,000 decisions at 1, 10 and 100 concurrent callers.
 *   npm run build && npm run bench:edge
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
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
// On disk, in a fresh directory (an object's storage is one SQLite database either way).
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

type Variant = "floodgate-exact" | "floodgate-exact-deny-cache" | "floodgate-leased" | "floodgate-leased-deny-cache" | "hono-rate-limiter";
interface Scenario {
  name: string;
  variants: readonly Variant[];
  keys: number;
  /** Decisions per key. */
  hits: number;
  limit: number;
  concurrency: number;
  /** Keys per request to the Worker; requests are `pauseMs` apart (see below). */
  batch: number;
}
const ALL: readonly Variant[] = [
  "floodgate-exact",
  "floodgate-exact-deny-cache",
  "floodgate-leased",
  "floodgate-leased-deny-cache",
  "hono-rate-limiter",
];
// `--many-keys-variants=a,b`: the stores run on 10,000 keys (each one takes minutes on a loaded machine).
const manyKeysVariants = (process.argv.find((a) => a.startsWith("--many-keys-variants="))?.split("=")[1]?.split(",") ??
  ["floodgate-exact", "floodgate-exact-deny-cache", "floodgate-leased-deny-cache", "hono-rate-limiter"]) as Variant[];
const SCENARIOS: Scenario[] = [
  ...(process.argv.includes("--no-hot-key")
    ? []
    : [{ name: "hot key", variants: ALL, keys: 1, hits: 2000, limit: 1000, concurrency: 10, batch: 1 }]),
  // 10,000 keys, each seen 3 times with a limit of 1: one admission and two denials per key.
  // workerd caps the SQLite heap of its whole process at 512 MiB (sqlite3_hard_heap_limit64;
  // Cloudflare's own runtime enables a larger cap), and every object held open keeps its database
  // open: past about 3,000 objects alive at once, calls fail with SQLITE_NOMEM. An object that
  // has had no request for 10 s is evicted and its database closed, as on Cloudflare. So the keys
  // go in requests of 2,000 keys each (the stubs of a request are released when it ends), 12 s
  // apart: at most about 2,000 objects are alive at once, and every key's decisions are in one request.
  ...(process.argv.includes("--no-many-keys") ? [] : [
    {
      name: "10,000 keys",
      variants: manyKeysVariants,
      keys: 10_000,
      hits: 3,
      limit: 1,
      concurrency: 50,
      batch: 2000,
    },
  ]),
];
const PAUSE_MS = 12_000;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const rows: Record<string, unknown>[] = [];
let run = 0;
for (const s of SCENARIOS) {
  for (const variant of s.variants) {
    const prefix = `b${run++}:`;
    const total = { admitted: 0, ms: 0, requests: 0, overAdmitted: 0, mostPerKey: 0, statuses: {} as Record<string, number> };
    for (let firstKey = 0; firstKey < s.keys; firstKey += s.batch) {
      if (s.keys > s.batch) await sleep(PAUSE_MS);
      const keys = Math.min(s.batch, s.keys - firstKey);
      const reply = await mf.dispatchFetch("http://bench.test/", {
        method: "POST",
        body: JSON.stringify({ variant, decisions: keys * s.hits, keys, firstKey, concurrency: s.concurrency, limit: s.limit, prefix }),
      });
      const r = await reply.json() as typeof total;
      total.admitted += r.admitted;
      total.ms += r.ms;
      total.requests += r.requests;
      total.overAdmitted += r.overAdmitted;
      total.mostPerKey = Math.max(total.mostPerKey, r.mostPerKey);
      for (const [status, n] of Object.entries(r.statuses)) total.statuses[status] = (total.statuses[status] ?? 0) + n;
    }
    const decisions = s.keys * s.hits;
    const row = {
      scenario: s.name,
      variant,
      decisions,
      admitted: total.admitted,
      overAdmittedKeys: total.overAdmitted,
      perSecond: Math.round((decisions / total.ms) * 1000),
      doRequestsPer1000: Math.round((total.requests / decisions) * 1000 * 10) / 10,
    };
    rows.push(row);
    console.log(JSON.stringify({ ...row, mostPerKey: total.mostPerKey, statuses: total.statuses }));
  }
}
await mf.dispose();

const deno = process.argv.includes("--no-deno-kv")
  ? { status: 0, stdout: "", stderr: "" }
  : spawnSync(`${ROOT}/node_modules/.bin/deno`, ["run", "-A", "--no-check", "--unstable-kv", "bench/edge/deno-kv.ts"], {
    cwd: ROOT,
    encoding: "utf8",
  });
rmSync(persist, { recursive: true, force: true });
if (deno.status !== 0) throw new Error(`bench/edge/deno-kv.ts failed: ${deno.stderr}`);
const kvRows = deno.stdout.trim().split("\n").filter(Boolean).map((line) => JSON.parse(line));
for (const r of kvRows) console.log(JSON.stringify(r));

const lines = [
  "| scenario | store | decisions | admitted | keys over the limit | decisions/s | DO requests per 1,000 decisions |",
  "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
  ...rows.map((r) =>
    `| ${r.scenario} | ${r.variant} | ${r.decisions} | ${r.admitted} | ${r.overAdmittedKeys} | ${r.perSecond} | ${r.doRequestsPer1000} |`
  ),
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
