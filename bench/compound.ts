/**
 * A 4-dimension compound decision against 4 separate `limit()` calls (a harness, not a test):
 *   node --import tsx bench/compound.ts [--decisions 4000] [--rounds 3] [--no-valgrind]
 *
 * The dimensions, as in docs/compound-limits.md: a user's 100 per minute (sliding window), an
 * organisation's 10,000 per day (fixed window), an IP's 20 per second (token bucket), a global
 * 5,000 per second (fixed window), every limit raised so that every decision admits; 1,000 users,
 * 100 organisations, 1,000 IPs in a cycle. "4 × limit()" makes the four calls one after another,
 * awaiting each, as an application that checks its dimensions in turn does (and as the ordered
 * path does); "compound" is one `compound.limit()`.
 *
 * In one run:
 *  - memory store: machine instructions per decision (the process under callgrind, counted only
 *    while the measured loop runs: the count at 3n decisions minus the count at n), and
 *    decisions/s, the two subjects interleaved round by round;
 *  - one Redis server (started here): round trips per decision (the client's calls, from
 *    `INFO commandstats`), machine instructions inside Redis per decision (redis-server under
 *    callgrind, counting only inside evalShaCommand), and decisions/s at 1 and 16 loops in
 *    flight, interleaved round by round.
 */
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Redis as IORedis } from "ioredis";
import {
  createCompoundLimiter,
  createRateLimiter,
  fixedWindow,
  memoryStore,
  type RateLimitStore,
  redisStore,
  slidingWindow,
  tokenBucket,
} from "../packages/core/src/index.ts";
import { freePort, startRedis } from "../test/support/redis-server.ts";

const arg = (name: string, fallback: number): number => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const DECISIONS = arg("decisions", 4_000);
const ROUNDS = arg("rounds", 3);
const SELF = fileURLToPath(import.meta.url);

/** The two subjects over `store`: each takes the request's index and decides it. */
function subjects(store: RateLimitStore): Record<"compound" | "4 × limit()", (i: number) => Promise<unknown>> {
  const big = 10_000_000;
  const user = createRateLimiter({ policy: slidingWindow({ limit: big, window: "1m" }), store, prefix: "u:" });
  const org = createRateLimiter({ policy: fixedWindow({ limit: big, window: "1d" }), store, prefix: "o:" });
  const ip = createRateLimiter({ policy: tokenBucket({ capacity: big, refillRate: 1_000_000 }), store, prefix: "i:" });
  const global = createRateLimiter({ policy: fixedWindow({ limit: big, window: "1s" }), store, prefix: "g:" });
  const compound = createCompoundLimiter({ dimensions: { user, org, ip, global } });
  const keys = Array.from(
    { length: 1000 },
    (_, i) => ({ user: `user:${i}`, org: `org:${i % 100}`, ip: `10.0.${i >> 8}.${i & 255}`, global: "all" }),
  );
  return {
    compound: (i) => compound.limit(keys[i % 1000]!),
    "4 × limit()": async (i) => {
      const k = keys[i % 1000]!;
      await user.limit(k.user);
      await org.limit(k.org);
      await ip.limit(k.ip);
      await global.limit(k.global);
    },
  };
}

async function loop(decide: (i: number) => Promise<unknown>, n: number, concurrency = 1): Promise<number> {
  let next = 0;
  const start = performance.now();
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (next < n) await decide(next++);
  }));
  return (n / (performance.now() - start)) * 1000;
}

const median = (xs: number[]): number => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const fmt = (x: number): string => Math.round(x).toLocaleString("en-US");

// A child under callgrind: warms the subject, switches instrumentation on, runs n decisions.
const child = process.argv.indexOf("--child");
if (child > 0) {
  const name = process.argv[child + 1] as "compound" | "4 × limit()";
  const n = Number(process.argv[child + 2]);
  const decide = subjects(memoryStore())[name];
  await loop(decide, 20_000);
  (globalThis as { gc?: () => void }).gc?.();
  execFileSync("callgrind_control", ["-i", "on", String(process.pid)], { stdio: "ignore" });
  await loop(decide, n);
  process.exit(0);
}

/** Instructions per decision of a subject on the memory store (alone in its process). */
function memoryInstructions(name: string): number {
  const ir = (n: number): number => {
    const run = spawnSync("valgrind", [
      "--tool=callgrind",
      "--instr-atstart=no",
      "--callgrind-out-file=/dev/null",
      process.execPath,
      "--single-threaded",
      "--predictable-gc-schedule",
      "--expose-gc",
      "--import",
      "tsx",
      SELF,
      "--child",
      name,
      String(n),
    ], { encoding: "utf8" });
    const m = /Collected : (\d+)/.exec(run.stderr ?? "");
    if (!m) throw new Error(`no count from valgrind: ${run.error ?? run.stderr}`);
    return Number(m[1]);
  };
  return (ir(3 * DECISIONS) - ir(DECISIONS)) / (2 * DECISIONS);
}

const valgrind = !process.argv.includes("--no-valgrind");
const rows: string[] = [];

// Memory store.
{
  const s = subjects(memoryStore());
  const rates: Record<string, number[]> = { compound: [], "4 × limit()": [] };
  for (const name of Object.keys(rates)) await loop(s[name as keyof typeof s], 20_000);
  for (let r = 0; r < ROUNDS; r++) {
    for (const name of Object.keys(rates)) rates[name]!.push(await loop(s[name as keyof typeof s], 50_000));
  }
  for (const name of Object.keys(rates)) {
    const instructions = valgrind ? fmt(memoryInstructions(name)) : "";
    rows.push(`| memory | ${name} | 0 | ${instructions} | | ${fmt(median(rates[name]!))} | |`);
  }
}

// One Redis server: round trips and timings on a plain one; instructions on one under callgrind.
{
  const redis = await startRedis();
  const client = new IORedis(redis.port, redis.host);
  const s = subjects(redisStore({ client }));
  const names = ["compound", "4 × limit()"] as const;
  const trips: Record<string, number> = {};
  const c1: Record<string, number[]> = { compound: [], "4 × limit()": [] };
  const c16: Record<string, number[]> = { compound: [], "4 × limit()": [] };
  for (const name of names) {
    await loop(s[name], 1000, 16);
    await client.config("RESETSTAT");
    await loop(s[name], 1000, 1);
    const stats = (await client.info("commandstats")) as string;
    let calls = 0;
    for (const m of stats.matchAll(/cmdstat_(\w+):calls=(\d+)/g)) if (m[1] !== "config" && m[1] !== "info") calls += Number(m[2]);
    // Commands run inside scripts are counted too: keep the client's own (EVALSHA and EVAL).
    trips[name] = (Number(/cmdstat_evalsha:calls=(\d+)/.exec(stats)?.[1] ?? 0) + Number(/cmdstat_eval:calls=(\d+)/.exec(stats)?.[1] ?? 0)) /
      1000;
  }
  for (let r = 0; r < ROUNDS; r++) {
    for (const name of names) {
      c1[name]!.push(await loop(s[name], DECISIONS / 4, 1));
      c16[name]!.push(await loop(s[name], DECISIONS, 16));
    }
  }
  client.disconnect();
  await redis.stop();
  const inRedis = valgrind ? await redisInstructions() : {};
  for (const name of names) {
    rows.push(
      `| Redis | ${name} | ${trips[name]} | | ${inRedis[name] === undefined ? "" : fmt(inRedis[name]!)} | ${fmt(median(c1[name]!))} | ${
        fmt(median(c16[name]!))
      } |`,
    );
  }
}

console.log(
  `node ${process.version}, ${os.cpus().length} CPUs, load ${os.loadavg().map((l) => l.toFixed(1)).join(" ")}; ${ROUNDS} rounds, median\n`,
);
console.log(
  "| store | 4 dimensions decided by | round trips per decision | instructions per decision (this process) | instructions per decision inside Redis | decisions/s, 1 in flight | decisions/s, 16 in flight |",
);
console.log("|---|---|---|---|---|---|---|");
for (const row of rows) console.log(row);

/** Instructions inside a redis-server under callgrind (only inside evalShaCommand) per decision. */
async function redisInstructions(n = 1000): Promise<Record<string, number>> {
  const dir = mkdtempSync(path.join(os.tmpdir(), "floodgate-compound-cg-"));
  const port = await freePort();
  const server = spawn("valgrind", [
    "--tool=callgrind",
    "--toggle-collect=evalShaCommand",
    `--callgrind-out-file=${path.join(dir, "cg.%p")}`,
    "redis-server",
    "--port",
    String(port),
    "--bind",
    "127.0.0.1",
    "--save",
    "",
    "--appendonly",
    "no",
    "--dir",
    dir,
  ], { stdio: "ignore" });
  const pid = server.pid!;
  const kill = (): void => {
    if (server.exitCode === null && server.signalCode === null) process.kill(pid, "SIGKILL");
  };
  process.once("exit", kill);
  const client = new IORedis(port, "127.0.0.1", { retryStrategy: () => 200, maxRetriesPerRequest: null });
  client.on("error", () => undefined);
  const out: Record<string, number> = {};
  try {
    await new Promise((resolve) => client.once("ready", resolve));
    const s = subjects(redisStore({ client }));
    for (const name of ["compound", "4 × limit()"] as const) {
      await loop(s[name], 1000);
      execFileSync("callgrind_control", ["-z", String(pid)], { stdio: "ignore" });
      await loop(s[name], n);
      const label = `s${Object.keys(out).length}`;
      execFileSync("callgrind_control", ["-d", label, String(pid)], { stdio: "ignore" });
      const dump = readdirSync(dir).map((f) => readFileSync(path.join(dir, f), "utf8")).find((t) =>
        t.includes(`\ndesc: Trigger: dump ${label}\n`)
      );
      out[name] = Number(dump?.match(/^summary: (\d+)$/m)?.[1]) / n;
    }
  } finally {
    client.disconnect();
    kill();
    rmSync(dir, { recursive: true, force: true });
  }
  return out;
}
