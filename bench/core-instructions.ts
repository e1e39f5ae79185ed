/**
 * Core decisions in machine instructions (a harness, not a test; needs valgrind):
 *   npx tsx bench/core-instructions.ts <subject> <scenario> <api> [--baseline <dir>] [--out <file>]
 *   subject: tokenBucket | slidingWindow | fixedWindow | slidingLog | erl | map | noop | rlf | clock
 *   scenario: hot | 100k | denied | now | 1m (the rows of bench/core.ts)
 *   api: decide | limit | floor (`Promise.resolve(decide())`, awaited: the floor of `limit()`) |
 *   async (`async (key) => decide(key)`, awaited: the same work behind an async function's
 *   promise); peers are always awaited
 *   --baseline <dir>: count the copy of Floodgate in <dir> (made by scripts/bench-baseline.sh)
 *   instead of the working tree's, alone in its process as the working tree's is.
 *   --out <file>: keep callgrind's output of the larger run (for callgrind_annotate).
 * Runs itself twice under `valgrind --tool=callgrind --instr-atstart=no` (node --single-threaded
 * --expose-gc --predictable-gc-schedule): each child builds the limiter as bench/core.ts does for that row, warms every
 * Floodgate path first as bench/core.ts does, runs the row's own loop 20,000 times, collects
 * garbage, switches instrumentation on (`callgrind_control -i on`) and makes 50,000 or 150,000
 * calls. Instructions per call = (Ir(150,000) − Ir(50,000)) / 100,000.
 * `--predictable-gc-schedule`: V8 otherwise sizes its heap and schedules collections from
 * measured speeds (bytes allocated per millisecond, the memory reducer's timers), so on a loaded
 * machine, where a run under valgrind takes longer in wall time, the measured loop ran a
 * different number of collections: repeats of the same row were seen 1.3–3× apart. With a fixed
 * schedule, other load cannot move the count.
 */
import { execSync, spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { baselineRoot, CURRENT_ROOT } from "./copies.ts";
import { ASYNC_FLOOR, CLOCK, DECIDE, floodgate, FLOOR, peer, PEERS, SCENARIO_NAMES, useCopies, warmUp } from "./core-rows.ts";

const flag = (name: string): string | undefined => {
  const i = process.argv.indexOf(`--${name}`);
  return i === -1 ? undefined : process.argv[i + 1];
};
const positional = process.argv.slice(2).filter((a, i, all) => !a.startsWith("--") && !all[i - 1]?.startsWith("--"));
const [subject, scenarioArg, api, callsArg] = positional;
const baseline = baselineRoot();
const out = flag("out");
if (callsArg === undefined) {
  // The parent: two children under callgrind, the difference of their counts.
  const ir = (calls: number): number => {
    const run = spawnSync("valgrind", [
      "--tool=callgrind",
      "--instr-atstart=no",
      `--callgrind-out-file=${out !== undefined && calls > 50_000 ? out : "/dev/null"}`,
      process.execPath,
      "--single-threaded",
      "--predictable-gc-schedule",
      "--expose-gc",
      "--import",
      "tsx",
      fileURLToPath(import.meta.url),
      subject!,
      scenarioArg!,
      api!,
      String(calls),
      ...(baseline === undefined ? [] : ["--baseline", baseline]),
    ], { encoding: "utf8", env: { ...process.env, IB_CTL: "1" } });
    const m = /Collected : (\d+)/.exec(run.stderr ?? "");
    if (!m) throw new Error(`no instruction count from valgrind (is it installed?): ${run.error ?? run.stderr}`);
    return Number(m[1]);
  };
  const low = ir(50_000);
  const high = ir(150_000);
  console.log(
    `${subject} ${scenarioArg} ${api}${baseline === undefined ? "" : ` (baseline ${baseline})`}: ${
      Math.round((high - low) / 100_000)
    } instructions per call`,
  );
  process.exit(0);
}
const calls = Number(callsArg);
const PEER_NAMES: Record<string, (typeof PEERS)[number]> = { rlf: PEERS[0], erl: PEERS[1], map: PEERS[2], noop: PEERS[3], clock: CLOCK };

// One copy of Floodgate per process, named as the working tree's rows are.
await useCopies([{ suffix: "", root: baseline ?? CURRENT_ROOT }]);
// Warm every Floodgate path first, as bench/core.ts does.
await warmUp();

const scenario = SCENARIO_NAMES[scenarioArg!]!;
// Under `valgrind --tool=callgrind --instr-atstart=no`, IB_CTL=1 switches instrumentation on here.
// A full collection first (node --expose-gc), so that no earlier garbage is swept inside the measured phase.
const measure = (): void => {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc) {
    gc();
    gc();
  }
  if (process.env.IB_CTL) execSync(`callgrind_control -i on ${process.pid}`, { stdio: "ignore" });
};

/** The measured loops: plain functions (not the module body, which is async and reaches optimized code late). */
function loopSync(fn: () => unknown, n: number): number {
  let admitted = 0;
  for (let i = 0; i < n; i++) if ((fn() as { allowed: boolean }).allowed) admitted++;
  return admitted;
}
async function loopAsync(fn: () => unknown, n: number): Promise<number> {
  let admitted = 0;
  for (let i = 0; i < n; i++) if (((await fn()) as { allowed?: boolean }).allowed !== false) admitted++;
  return admitted;
}

let sink: number;
if (!(subject! in PEER_NAMES)) {
  const suffix = api === "decide" ? DECIDE : api === "floor" ? FLOOR : api === "async" ? ASYNC_FLOOR : "";
  const fn = await floodgate(`${subject}${suffix}`, scenario);
  // Like mitata's warm-up: the row's own loop first, so that it is optimized before measuring.
  if (api === "decide") loopSync(fn, 20_000);
  else await loopAsync(fn, 20_000);
  measure();
  sink = api === "decide" ? loopSync(fn, calls) : await loopAsync(fn, calls);
} else {
  const { fn } = await peer(PEER_NAMES[subject!]!, scenario);
  // The clock row is synchronous, as a decision reads it; the other peers are awaited.
  const loop = PEER_NAMES[subject!] === CLOCK ? (f: () => unknown, n: number) => Promise.resolve(loopSync(f, n)) : loopAsync;
  await loop(fn, 20_000);
  measure();
  sink = await loop(fn, calls);
}
if (process.env.IB_VERBOSE) console.log(subject, scenario, api, calls, "admitted", sink);
