/**
 * What a Redis store decision costs the client process, in machine instructions (a harness, not a
 * test; needs valgrind):
 *   npx tsx bench/redis-client-instructions.ts <admitted|cached|denied> [--baseline <dir>] [--out <file>]
 *   admitted: every call sent, every reply an admission (the usual request);
 *   cached: the identifier denied once, every counted call answered by the deny cache;
 *   denied: every call sent (no deny cache), every reply a denial.
 * `createRateLimiter` + `slidingWindow` + `redisStore` over an ioredis-shaped client whose `evalsha`
 * resolves at once with a fixed reply: no network and no client library, so only Floodgate's work
 * is counted (`limit()` awaited, the store's promise, the deny cache wrapper, the reply's checks).
 * Counted as bench/core-instructions.ts counts: `node --single-threaded --predictable-gc-schedule`
 * under `valgrind --tool=callgrind --instr-atstart=no`, 20,000 warm-up calls, garbage collected,
 * then 20,000 or 60,000 counted calls; instructions per call = (Ir(60,000) − Ir(20,000)) / 40,000.
 * `--baseline <dir>`: the copy in <dir> (scripts/bench-baseline.sh) instead of the working tree.
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { baselineRoot, CURRENT_ROOT, loadCore } from "./copies.ts";

const positional = process.argv.slice(2).filter((a, i, all) => !a.startsWith("--") && !all[i - 1]?.startsWith("--"));
const [scenario, callsArg] = positional;
if (scenario !== "admitted" && scenario !== "cached" && scenario !== "denied") {
  throw new Error("usage: npx tsx bench/redis-client-instructions.ts <admitted|cached|denied> [--baseline <dir>] [--out <file>]");
}
const baseline = baselineRoot();
const outIndex = process.argv.indexOf("--out");
const out = outIndex === -1 ? undefined : process.argv[outIndex + 1];
const LOW = 20_000;
const HIGH = 60_000;

if (callsArg === undefined) {
  const ir = (calls: number): number => {
    const run = spawnSync("valgrind", [
      "--tool=callgrind",
      "--instr-atstart=no",
      `--callgrind-out-file=${out !== undefined && calls === HIGH ? out : "/dev/null"}`,
      process.execPath,
      "--single-threaded",
      "--predictable-gc-schedule",
      "--expose-gc",
      "--import",
      "tsx",
      fileURLToPath(import.meta.url),
      scenario,
      String(calls),
      ...(baseline === undefined ? [] : ["--baseline", baseline]),
    ], { encoding: "utf8" });
    if (run.status !== 0) throw new Error(`the counted process failed: ${run.stderr}`);
    const m = /Collected : (\d+)/.exec(run.stderr ?? "");
    if (!m) throw new Error(`no instruction count from valgrind (is it installed?): ${run.error ?? run.stderr}`);
    return Number(m[1]);
  };
  const low = ir(LOW);
  const high = ir(HIGH);
  console.log(
    `redis client, ${scenario}${baseline === undefined ? "" : ` (baseline ${baseline})`}: ${
      Math.round((high - low) / (HIGH - LOW))
    } instructions per call`,
  );
  process.exit(0);
}

const core = await loadCore({ suffix: "", root: baseline ?? CURRENT_ROOT });
const admitted = scenario === "admitted";
// One sliding-window policy: [allowed, remaining, resetAt, retryAfterMs] (+ a mark when charged).
const reply = (): number[] => admitted ? [1, 1, 999, 1_700_000_001_000, 0, 0] : [0, 0, 0, 1_700_000_001_000, 3_600_000];
const client = {
  evalsha: (_sha: string, _n: number, ..._rest: string[]): Promise<unknown> => Promise.resolve(reply()),
  eval: (_s: string, _n: number, ..._rest: string[]): Promise<unknown> => Promise.resolve(reply()),
  del: (..._keys: string[]): Promise<unknown> => Promise.resolve(1),
};
const limiter = core.createRateLimiter({
  policy: core.slidingWindow({ limit: 1_000, window: "1h" }),
  // No `reconnect` option: copies from before it have none (the client has no `duplicate()`, so
  // the store stays on it either way).
  store: core.redisStore({ client, denyCache: scenario !== "denied" }),
});
let sink = 0;
const loop = async (n: number): Promise<void> => {
  for (let i = 0; i < n; i++) if ((await limiter.limit("user")).allowed) sink++;
};
await loop(20_000);
const calls = Number(callsArg);
const gc = (globalThis as { gc?: () => void }).gc!;
gc();
gc();
spawnSync("callgrind_control", ["-i", "on", String(process.pid)]);
await loop(calls);
spawnSync("callgrind_control", ["-i", "off", String(process.pid)]);
if (process.env.IB_VERBOSE) console.log(scenario, calls, "admitted", sink);
