/**
 * What a Redis store decision costs the client process, in machine instructions (a harness, not a
 * test; needs valgrind):
 *   npx tsx bench/redis-client-instructions.ts <admitted|cached|denied> [--kind sliding|fixed|token]
 *     [--client ioredis|node-redis|upstash] [--baseline <dir>] [--out <file>]
 *   admitted: every call sent, every reply an admission (the usual request);
 *   cached: the identifier denied once, every counted call answered by the deny cache;
 *   denied: every call sent (no deny cache), every reply a denial.
 * `createRateLimiter` + one policy of `--kind` (default the sliding window) + `redisStore` (or
 * `upstashStore` with `--client upstash`) over a client of that library's shape (default ioredis)
 * whose script calls resolve at once with a fixed reply: no network and no client library, so
 * only Floodgate's work is counted (`limit()` awaited, the resilient wrapper, the deny cache, the
 * store's promise, the reply's checks and decoding, the decision). An admission's reply is the
 * one the kind's script sends for a charge of 1 on the server's clock: its first step's short
 * answer (`[value, now]` for the fixed window, `"<state> <s> <µs>"` for the token bucket and the
 * sliding window), read back by the store; a denial's is the usual five-number result.
 * Counted as bench/core-instructions.ts counts: `node --single-threaded --predictable-gc-schedule`
 * under `valgrind --tool=callgrind --instr-atstart=no`, 20,000 warm-up calls, garbage collected,
 * then 20,000 or 60,000 counted calls; instructions per call = (Ir(60,000) − Ir(20,000)) / 40,000.
 * `--baseline <dir>`: the copy in <dir> (scripts/bench-baseline.sh) instead of the working tree.
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { baselineRoot, type Core, CURRENT_ROOT, loadCore } from "./copies.ts";

const positional = process.argv.slice(2).filter((a, i, all) => !a.startsWith("--") && !all[i - 1]?.startsWith("--"));
const flag = (name: string, fallback: string): string => {
  const i = process.argv.indexOf(`--${name}`);
  return i === -1 ? fallback : process.argv[i + 1]!;
};
const kind = flag("kind", "sliding");
const clientKind = flag("client", "ioredis");
if (!["sliding", "fixed", "token"].includes(kind) || !["ioredis", "node-redis", "upstash"].includes(clientKind)) {
  throw new Error("--kind takes sliding, fixed or token; --client ioredis, node-redis or upstash");
}
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
      "--kind",
      kind,
      "--client",
      clientKind,
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
    `redis client, ${scenario}, ${kind}, ${clientKind}${baseline === undefined ? "" : ` (baseline ${baseline})`}: ${
      Math.round((high - low) / (HIGH - LOW))
    } instructions per call`,
  );
  process.exit(0);
}

const core = await loadCore({ suffix: "", root: baseline ?? CURRENT_ROOT });
const admitted = scenario === "admitted";
// The clock the admissions' replies carry (µs): 2023-11-14T22:13:20Z, and one µs more per call.
let now = 1_700_000_000_000_000;
const HOUR_US = 3_600_000_000;
/** An admission, as the kind's script for a charge of 1 on the server's clock answers it. */
const admission = (): unknown => {
  now++;
  const seconds = Math.floor(now / 1e6);
  const micros = now % 1e6;
  if (kind === "fixed") return [Math.floor(now / HOUR_US) % 1_048_576 + 7 * 1_048_576, now];
  if (kind === "token") return `-${now - 3_600_000_000} ${seconds} ${micros}`;
  return `${Math.floor(now / HOUR_US)}:7:3 ${seconds} ${micros}`;
};
// A denial: [allowed, remaining, resetAt, retryAfterMs] after the overall flag.
const reply = (): unknown => admitted ? admission() : [0, 0, 0, 1_700_000_001_000, 3_600_000];
const script = (): Promise<unknown> => Promise.resolve(reply());
const client = clientKind === "ioredis"
  ? { evalsha: script, eval: script, del: (..._keys: string[]): Promise<unknown> => Promise.resolve(1) }
  : clientKind === "node-redis"
  ? { evalSha: script, eval: script, del: (_keys: string[]): Promise<unknown> => Promise.resolve(1) }
  : { evalsha: script, eval: script, del: (..._keys: string[]): Promise<unknown> => Promise.resolve(1) };
const hour = { limit: 1_000, window: "1h" } as const;
const limiter = core.createRateLimiter({
  ...(process.env.FG_EXP === "nores"
    ? { resilience: false }
    : process.env.FG_EXP === "notimeout"
    ? { resilience: { timeoutMs: false } }
    : {}),
  policy: kind === "fixed"
    ? core.fixedWindow(hour)
    : kind === "token"
    ? core.tokenBucket({ capacity: 1_000, refillRate: 1_000 / 3600 })
    : core.slidingWindow(hour),
  // No `reconnect` option: copies from before it have none (the client has no `duplicate()`, so
  // the store stays on it either way).
  store: clientKind === "upstash"
    ? core.upstashStore({ redis: client as Parameters<Core["upstashStore"]>[0]["redis"], denyCache: scenario !== "denied" })
    : core.redisStore({ client: client as Parameters<Core["redisStore"]>[0]["client"], denyCache: scenario !== "denied" }),
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
