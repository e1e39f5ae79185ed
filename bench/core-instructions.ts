/**
 * Core decisions in machine instructions (a harness, not a test; needs valgrind):
 *   npx tsx bench/core-instructions.ts <subject> <scenario> <api>
 *   subject: tokenBucket | slidingWindow | fixedWindow | slidingLog | erl | map | noop | rlf
 *   scenario: hot | 100k | denied | now | 1m (the rows of bench/core.ts)
 *   api: decide | limit (peers are always awaited)
 * Runs itself twice under `valgrind --tool=callgrind --instr-atstart=no` (node --single-threaded
 * --expose-gc): each child builds the limiter as bench/core.ts does for that row, warms every
 * Floodgate path first as bench/core.ts does, runs the row's own loop 20,000 times, collects
 * garbage, switches instrumentation on (`callgrind_control -i on`) and makes 50,000 or 150,000
 * calls. Instructions per call = (Ir(150,000) − Ir(50,000)) / 100,000: other load on the
 * machine cannot move it (repeats agree within ≈ ±30 on a quiet machine).
 */
import { execSync, spawnSync } from "node:child_process";
import { MemoryStore } from "express-rate-limit";
import { RateLimiterMemory } from "rate-limiter-flexible";
import { fileURLToPath } from "node:url";
import { createRateLimiter, fixedWindow, memoryStore, slidingLog, slidingWindow, tokenBucket, type Policy } from "../packages/core/src/index.ts";

const [subject, scenarioArg, api, callsArg] = process.argv.slice(2);
if (callsArg === undefined) {
  // The parent: two children under callgrind, the difference of their counts.
  const ir = (calls: number): number => {
    const run = spawnSync("valgrind", [
      "--tool=callgrind", "--instr-atstart=no", "--callgrind-out-file=/dev/null",
      process.execPath, "--single-threaded", "--expose-gc", "--import", "tsx", fileURLToPath(import.meta.url),
      subject!, scenarioArg!, api!, String(calls),
    ], { encoding: "utf8", env: { ...process.env, IB_CTL: "1" } });
    const m = /Collected : (\d+)/.exec(run.stderr ?? "");
    if (!m) throw new Error(`no instruction count from valgrind (is it installed?): ${run.error ?? run.stderr}`);
    return Number(m[1]);
  };
  const low = ir(50_000);
  const high = ir(150_000);
  console.log(`${subject} ${scenarioArg} ${api}: ${Math.round((high - low) / 100_000)} instructions per call`);
  process.exit(0);
}
const calls = Number(callsArg);
const T0 = 1_700_000_000_000;
const DISTINCT = 100_000;
const KEYS = Array.from({ length: DISTINCT }, (_, i) => `user:${i}`);
const HOT = "user:hot";
const DAY = 86_400_000;
type Scenario = "hot key" | "hot key, Date.now" | "100k keys" | "100k keys, 1M cap" | "mostly denied";
const SCENARIOS: readonly Scenario[] = ["hot key", "hot key, Date.now", "100k keys", "100k keys, 1M cap", "mostly denied"];
const NAMES: Record<string, Scenario> = { hot: "hot key", "100k": "100k keys", denied: "mostly denied", now: "hot key, Date.now", "1m": "100k keys, 1M cap" };
const skip = (algorithm: string, scenario: Scenario): boolean => scenario === "hot key, Date.now" && algorithm === "slidingLog";
const ALGORITHMS: Record<string, (limit: number, windowMs: number) => Policy> = {
  tokenBucket: (limit, windowMs) => tokenBucket({ capacity: limit, refillRate: (limit * 1000) / windowMs }),
  slidingWindow: (limit, windowMs) => slidingWindow({ limit, window: windowMs }),
  fixedWindow: (limit, windowMs) => fixedWindow({ limit, window: windowMs }),
  slidingLog: (limit, windowMs) => slidingLog({ limit, window: windowMs }),
};
const SUBJECTS = Object.keys(ALGORITHMS).flatMap((a) => [a, `${a} decide()`]);

async function floodgate(algorithm: string, sync: boolean, scenario: Scenario): Promise<() => unknown> {
  let now = T0;
  const step = scenario === "hot key" ? 20 : scenario === "mostly denied" ? 1 : 0.001;
  const policy = scenario === "mostly denied"
    ? ALGORITHMS[algorithm]!(1, DAY)
    : scenario === "hot key, Date.now" ? ALGORITHMS[algorithm]!(1e9, 1_000_000) : ALGORITHMS[algorithm]!(100, 1000);
  const limiter = createRateLimiter({
    policy,
    store: scenario === "100k keys, 1M cap" ? memoryStore({ maxKeys: 1_000_000 }) : memoryStore(),
    ...(scenario === "hot key, Date.now" ? {} : { clock: () => (now += step) }),
  });
  if (scenario.startsWith("100k keys")) {
    for (const key of KEYS) await limiter.limit(key);
    let i = 0;
    return sync
      ? () => { const key = KEYS[i]!; if (++i === DISTINCT) i = 0; return limiter.decide(key); }
      : () => { const key = KEYS[i]!; if (++i === DISTINCT) i = 0; return limiter.limit(key); };
  }
  await limiter.limit(HOT);
  if (scenario === "mostly denied" && (await limiter.limit(HOT)).allowed) throw new Error("expected a denial");
  return sync ? () => limiter.decide(HOT) : () => limiter.limit(HOT);
}

async function peer(name: string, scenario: Scenario): Promise<() => Promise<unknown>> {
  let call: (key: string) => Promise<unknown>;
  const ignore = (): void => {};
  if (name === "rlf") {
    const rlf = scenario === "mostly denied" ? new RateLimiterMemory({ points: 1, duration: DAY / 1000 }) : new RateLimiterMemory({ points: 1e12, duration: 1 });
    call = (key) => rlf.consume(key).catch(ignore);
  } else if (name === "erl") {
    const store = new MemoryStore();
    store.init({ windowMs: 60_000 } as Parameters<MemoryStore["init"]>[0]);
    call = (key) => store.increment(key);
  } else if (name === "noop") {
    call = async () => 1;
  } else {
    const counts = new Map<string, number>();
    call = async (key) => { const n = (counts.get(key) ?? 0) + 1; counts.set(key, n); return n; };
  }
  if (scenario === "100k keys") {
    for (const key of KEYS) await call(key);
    let i = 0;
    return () => { const key = KEYS[i]!; if (++i === DISTINCT) i = 0; return call(key); };
  }
  await call(HOT);
  return () => call(HOT);
}

// Warm every Floodgate path first, as bench/core.ts does.
for (const scenario of SCENARIOS) {
  for (const s of SUBJECTS) {
    const algorithm = s.replace(" decide()", "");
    if (skip(algorithm, scenario) || scenario.startsWith("100k keys")) continue;
    const fn = await floodgate(algorithm, s.endsWith(" decide()"), scenario);
    for (let i = 0; i < 20_000; i++) await fn();
  }
}

const scenario = NAMES[scenarioArg!]!;
// Under `valgrind --tool=callgrind --instr-atstart=no`, IB_CTL=1 switches instrumentation on here.
// A full collection first (node --expose-gc), so that no earlier garbage is swept inside the measured phase.
const measure = (): void => {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc) { gc(); gc(); }
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
if (subject! in ALGORITHMS) {
  const fn = await floodgate(subject!, api === "decide", scenario);
  // Like mitata's warm-up: the row's own loop first, so that it is optimized before measuring.
  if (api === "decide") loopSync(fn, 20_000); else await loopAsync(fn, 20_000);
  measure();
  sink = api === "decide" ? loopSync(fn, calls) : await loopAsync(fn, calls);
} else {
  const fn = await peer(subject!, scenario);
  await loopAsync(fn, 20_000);
  measure();
  sink = await loopAsync(fn, calls);
}
if (process.env.IB_VERBOSE) console.log(subject, scenario, api, calls, "admitted", sink);
