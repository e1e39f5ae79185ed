/**
 * Redis store benchmark (a harness, not a timed test). Run: `npm run bench:redis`
 * (node --import tsx bench/redis.ts [--decisions 20000] [--rounds 3]).
 *
 * Starts its own redis-server (and the local Upstash bridge in front of it), then, for each
 * client, measures per-decision latency (mean, p99) and decisions/s at concurrency 1 and 64:
 *  - the floor: a bare `EVALSHA` of a script that returns 1, through the same client (the cost
 *    of one round trip, which no one-script-per-decision store can beat);
 *  - the floor with Floodgate's call shape, through the same client: one key, three ARGV, a
 *    script that only returns a five-integer array like Floodgate's result: what the call and
 *    reply cost before any limiter work;
 *  - Floodgate's store (sliding window, limit 1e8 per hour: every decision admits; 1,000
 *    identifiers in a cycle; deny cache on, as by default, though it never hits here);
 *  - rate-limiter-flexible `RateLimiterRedis` (ioredis only; same kind of load).
 * Concurrency c = c loops each awaiting one decision at a time. Each figure is the median of
 * `--rounds` rounds, subjects interleaved within a round. Redis commands per decision come from
 * `INFO commandstats` (reset before each subject), commands inside scripts listed separately.
 * CPU per decision at c=64 (Linux): this process's CPU time (the client; for Upstash also the
 * bridge, which runs in this process) and redis-server's (from /proc), both far steadier than
 * decisions/s on a shared machine.
 *
 * `--instructions` (needs valgrind) measures instead what no other load can disturb: machine
 * instructions inside Redis per script call (callgrind, counting only inside evalShaCommand),
 * and Redis commands per call, for the floor, rate-limiter-flexible and each Floodgate script, on
 * a redis-server started under valgrind here (and killed by its pid); counted as
 * test/redis/script-instructions.test.ts counts them (bench/redis-subjects.ts). With `--record`
 * it writes the Floodgate figures to bench/redis-instructions.json, which that test holds the
 * scripts to (and bench/README.md must show). `--parts` instead counts what the commands and
 * constructs a script is made of cost, each alone in a script; `--floors`, the least a
 * server-clock decision script can cost (bench/redis-floors.ts); `--sliding-log`, one sliding-log
 * decision that finds 10,000 entries aged out (and 3, and 1,000).
 *
 * `--baseline <dir>` (a copy of an earlier commit, made by scripts/bench-baseline.sh) adds every
 * Floodgate subject again for that copy's `@floodgate/core`, labelled "(baseline)", on the same
 * clients and server, interleaved with the others in every round (and in `--instructions`).
 */
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Redis as UpstashRedis } from "@upstash/redis";
import { Redis as IORedis } from "ioredis";
import { RateLimiterRedis } from "rate-limiter-flexible";
import { createClient } from "redis";
import { BASELINE_SUFFIX, copies, type Core, loadCore } from "./copies.ts";
import { startRedis } from "../test/support/redis-server.ts";
import { callgrindAvailable, startCallgrindRedis } from "../test/support/redis-callgrind.ts";
import { floors } from "./redis-floors.ts";
import { parts, slidingLogExpiry } from "./redis-parts.ts";
import {
  COUNTED_IDS,
  COUNTING,
  FIRST_DB,
  type InstructionRecord,
  instructionSubjects,
  RECORD_FILE,
  SUBJECT_NAMES,
} from "./redis-subjects.ts";
import { startUpstashBridge } from "../packages/upstash-local/src/index.ts";

const arg = (name: string, fallback: number): number => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const DECISIONS = arg("decisions", 20_000);
const ROUNDS = arg("rounds", 3);
const IDS = Array.from({ length: 1000 }, (_, i) => `user:${i}`);
const FLOOR = "return 1";
const SHAPE = "return {1, 1, 99999999, 1700003600000, 0}";
/** Each copy of Floodgate measured: the working tree's, then the baseline's with `--baseline`. */
const CORES: { suffix: string; core: Core }[] = [];
for (const copy of copies()) CORES.push({ suffix: copy.suffix, core: await loadCore(copy) });

interface Subject {
  name: string;
  /** Name of the floor row this subject is compared with (its own client), if any. */
  floor?: string;
  decide: (id: string) => Promise<unknown>;
}

interface Figures {
  perSecond: number;
  meanUs: number;
  p99Us: number;
  /** CPU µs per decision: this process, and redis-server (NaN where /proc is missing). */
  clientCpuUs: number;
  redisCpuUs: number;
}

/** CPU time (µs) a process has used so far, from /proc/<pid>/stat; NaN without /proc. */
const CLOCK_TICKS = (() => {
  try {
    return Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" })) || 100;
  } catch {
    return 100;
  }
})();
function processCpuUs(pid: number): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
    return ((Number(fields[11]) + Number(fields[12])) * 1e6) / CLOCK_TICKS;
  } catch {
    return NaN;
  }
}

let redisPid = 0;

async function measure(subject: Subject, concurrency: number, decisions: number): Promise<Figures> {
  const latencies = new Float64Array(decisions);
  let next = 0;
  const loop = async (): Promise<void> => {
    while (next < decisions) {
      const i = next++;
      const t0 = performance.now();
      await subject.decide(IDS[i % IDS.length]!);
      latencies[i] = performance.now() - t0;
    }
  };
  const cpu0 = process.cpuUsage();
  const redisCpu0 = processCpuUs(redisPid);
  const start = performance.now();
  await Promise.all(Array.from({ length: concurrency }, loop));
  const elapsed = performance.now() - start;
  const cpu = process.cpuUsage(cpu0);
  const redisCpu = processCpuUs(redisPid) - redisCpu0;
  const sorted = latencies.slice().sort();
  let sum = 0;
  for (const l of latencies) sum += l;
  return {
    perSecond: (decisions / elapsed) * 1000,
    meanUs: (sum / decisions) * 1000,
    p99Us: sorted[Math.floor(decisions * 0.99)]! * 1000,
    clientCpuUs: (cpu.user + cpu.system) / decisions,
    redisCpuUs: redisCpu / decisions,
  };
}

const median = (xs: number[]): number => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main(): Promise<void> {
  const redis = await startRedis();
  redisPid = redis.pid;
  const bridge = await startUpstashBridge({ redis: { host: redis.host, port: redis.port } });
  const io = new IORedis(redis.port, redis.host);
  const admin = new IORedis(redis.port, redis.host);
  const node = createClient({ socket: { host: redis.host, port: redis.port } });
  await node.connect();
  const upstash = new UpstashRedis({ url: bridge.url, token: bridge.token, enableTelemetry: false });
  const floorSha = (await admin.script("LOAD", FLOOR)) as string;
  const shapeSha = (await admin.script("LOAD", SHAPE)) as string;
  const subjects: Subject[] = [
    { name: "floor: bare EVALSHA (ioredis)", decide: () => io.evalsha(floorSha, 0) },
    {
      name: "floor with Floodgate's call and reply shape (ioredis)",
      floor: "floor: bare EVALSHA (ioredis)",
      decide: (id) => io.evalsha(shapeSha, 1, `b0:{${id}}`, "1", "100000000", "3600000"),
    },
  ];
  const rlf = new RateLimiterRedis({ storeClient: io, points: 100_000_000, duration: 3600, keyPrefix: "b4" });
  const ours = (client: string, floor: string, make: (core: Core, n: number) => (id: string) => Promise<unknown>): void => {
    CORES.forEach(({ suffix, core }, n) => subjects.push({ name: `floodgate ${client}${suffix}`, floor, decide: make(core, n) }));
  };
  const limiterOf = (core: Core, store: ReturnType<Core["redisStore"]>, prefix: string) =>
    core.createRateLimiter({ policy: core.slidingWindow({ limit: 100_000_000, window: "1h" }), store, prefix });
  ours("redisStore (ioredis)", "floor: bare EVALSHA (ioredis)", (core, n) => {
    const l = limiterOf(core, core.redisStore({ client: io }), `b1${n}:`);
    return (id) => l.limit(id);
  });
  subjects.push(
    { name: "rate-limiter-flexible RateLimiterRedis (ioredis)", floor: "floor: bare EVALSHA (ioredis)", decide: (id) => rlf.consume(id) },
    { name: "floor: bare EVALSHA (node-redis)", decide: () => node.evalSha(floorSha, { keys: [], arguments: [] }) },
    {
      name: "floor with Floodgate's call and reply shape (node-redis)",
      floor: "floor: bare EVALSHA (node-redis)",
      decide: (id) => node.evalSha(shapeSha, { keys: [`b0:{${id}}`], arguments: ["1", "100000000", "3600000"] }),
    },
  );
  ours("redisStore (node-redis)", "floor: bare EVALSHA (node-redis)", (core, n) => {
    const l = limiterOf(core, core.redisStore({ client: node }), `b2${n}:`);
    return (id) => l.limit(id);
  });
  subjects.push(
    { name: "floor: bare EVALSHA (@upstash/redis via bridge)", decide: () => upstash.evalsha(floorSha, [], []) },
    {
      name: "floor with Floodgate's call and reply shape (@upstash/redis via bridge)",
      floor: "floor: bare EVALSHA (@upstash/redis via bridge)",
      decide: (id) => upstash.evalsha(shapeSha, [`b0:{${id}}`], ["1", "100000000", "3600000"]),
    },
  );
  ours("upstashStore (@upstash/redis via bridge)", "floor: bare EVALSHA (@upstash/redis via bridge)", (core, n) => {
    const l = limiterOf(core, core.upstashStore({ redis: upstash }), `b3${n}:`);
    return (id) => l.limit(id);
  });

  // Commands per decision, and a warm-up (loads the scripts, creates the keys).
  const commands = new Map<string, string>();
  for (const s of subjects) {
    await admin.config("RESETSTAT");
    const n = 2000;
    for (let i = 0; i < n; i++) await s.decide(IDS[i % IDS.length]!);
    const info = (await admin.info("commandstats")) as string;
    const parts: string[] = [];
    for (const [, cmd, calls, usec] of info.matchAll(/cmdstat_([a-z|]+):calls=(\d+),usec=(\d+)/g)) {
      if (cmd!.startsWith("config") || cmd === "info") continue;
      const perCall = cmd === "evalsha" || cmd === "eval" ? ` (${(Number(usec) / Number(calls)).toFixed(1)} µs in Redis)` : "";
      parts.push(`${cmd} ${+(Number(calls) / n).toFixed(3)}${perCall}`);
    }
    commands.set(s.name, parts.join(", "));
  }

  const results = new Map<string, Record<number, Figures[]>>();
  for (let round = 0; round < ROUNDS; round++) {
    for (const concurrency of [1, 64]) {
      for (const s of subjects) {
        const figures = await measure(s, concurrency, concurrency === 1 ? Math.ceil(DECISIONS / 4) : DECISIONS);
        const row = results.get(s.name) ?? { 1: [], 64: [] };
        row[concurrency]!.push(figures);
        results.set(s.name, row);
      }
    }
  }

  const summary = (name: string, c: number): Figures => {
    const runs = results.get(name)![c]!;
    const of = (field: keyof Figures): number => median(runs.map((r) => r[field]));
    return {
      perSecond: of("perSecond"),
      meanUs: of("meanUs"),
      p99Us: of("p99Us"),
      clientCpuUs: of("clientCpuUs"),
      redisCpuUs: of("redisCpuUs"),
    };
  };
  const lines = [
    `Redis ${
      ((await admin.info("server")) as string).match(/redis_version:(\S+)/)?.[1]
    }, Node ${process.version}, ${DECISIONS} decisions at c=64 (${Math.ceil(DECISIONS / 4)} at c=1), median of ${ROUNDS} rounds`,
    "",
    "| subject | c=1 decisions/s | c=1 mean µs | c=1 p99 µs | c=1 vs floor | c=64 decisions/s | c=64 mean µs | c=64 p99 µs | c=64 vs floor | c=64 CPU µs per decision: client / Redis | Redis commands per decision |",
    "|---|---|---|---|---|---|---|---|---|---|---|",
  ];
  for (const s of subjects) {
    const cells = [1, 64].flatMap((c) => {
      const f = summary(s.name, c);
      const ratio = s.floor ? (f.perSecond / summary(s.floor, c).perSecond).toFixed(2) : "1";
      return [Math.round(f.perSecond), Math.round(f.meanUs), Math.round(f.p99Us), ratio];
    });
    const f64 = summary(s.name, 64);
    cells.push(`${f64.clientCpuUs.toFixed(1)} / ${f64.redisCpuUs.toFixed(1)}`);
    lines.push(`| ${s.name} | ${cells.join(" | ")} | ${commands.get(s.name)} |`);
  }
  console.log(lines.join("\n"));

  io.disconnect();
  admin.disconnect();
  node.destroy();
  await bridge.stop();
  await redis.stop();
}

/**
 * Instructions inside Redis per script call: a redis-server under callgrind counting only inside
 * evalShaCommand (test/support/redis-callgrind.ts); per subject, 1,000 warm-up decisions (keys
 * exist, as in steady state), then the counters are zeroed, `n` decisions run, and the dump's
 * total is divided by `n`. Beside each count: the Redis commands per decision (INFO commandstats
 * over the same `n` decisions, the script's own calls included) and the ratio to
 * rate-limiter-flexible's script, counted on the same server.
 */
async function instructions(n: number, record: boolean): Promise<void> {
  const cg = await startCallgrindRedis();
  const recorded: Record<string, { instructions: number; commands: Record<string, number> }> = {};
  const { client } = cg;
  try {
    const floorSha = (await client.script("LOAD", FLOOR)) as string;
    const subjects: [string, (id: string) => Promise<unknown>][] = [["floor: bare EVALSHA of return 1", () => client.evalsha(floorSha, 0)]];
    subjects.push([
      "rate-limiter-flexible RateLimiterRedis (fixed window)",
      ((l) => (id: string) => l.consume(id))(
        new RateLimiterRedis({ storeClient: await cg.connect(1), points: 100_000_000, duration: 3600, keyPrefix: "i6" }),
      ),
    ]);
    // Each subject in a database of its own: the working tree's in the ones the test uses.
    let db = FIRST_DB;
    for (const { suffix, core } of CORES) {
      const clients = [];
      for (let i = 0; i < SUBJECT_NAMES.length; i++) clients.push(await cg.connect(db++));
      for (const [name, decide] of instructionSubjects(core, clients)) subjects.push([`${name}${suffix}`, decide]);
    }
    const rows = [
      "| script (every decision admitted) | instructions per call in Redis | ÷ rate-limiter-flexible | Redis commands per decision |",
      "|---|---|---|---|",
    ];
    const counted: [string, number, string][] = [];
    for (const [name, decide] of subjects) {
      const { instructions, commands } = await cg.count(decide, COUNTED_IDS, n, COUNTING.warmUp);
      if (name.startsWith("floodgate") && !name.endsWith(BASELINE_SUFFIX)) recorded[name] = { instructions, commands };
      counted.push([name, instructions, Object.entries(commands).map(([cmd, calls]) => `${cmd} ${+calls.toFixed(3)}`).join(", ")]);
    }
    const peer = counted.find(([name]) => name.startsWith("rate-limiter-flexible"))![1];
    for (const [name, instructions, commands] of counted) {
      rows.push(`| ${name} | ${instructions.toLocaleString("en-US")} | ${(instructions / peer).toFixed(2)} | ${commands} |`);
    }
    console.log(
      `Redis ${cg.version} under callgrind, ${n} decisions per subject over ${COUNTING.ids} identifiers, after ${COUNTING.warmUp} warm-up decisions\n\n${
        rows.join("\n")
      }`,
    );
    if (record) {
      const file: InstructionRecord = { redis: cg.version, counting: { ...COUNTING, decisions: n }, scripts: recorded };
      writeFileSync(RECORD_FILE, `${JSON.stringify(file, null, 2)}\n`);
      console.log(`\nrecorded in ${fileURLToPath(RECORD_FILE)}`);
    }
  } finally {
    cg.stop();
  }
}

if (process.argv.includes("--instructions")) {
  if (!existsSync("/proc") || !callgrindAvailable()) throw new Error("--instructions needs valgrind (and callgrind_control) on PATH");
  if (["--parts", "--sliding-log", "--floors"].some((flag) => process.argv.includes(flag))) {
    const cg = await startCallgrindRedis();
    try {
      console.log(
        process.argv.includes("--parts")
          ? `Redis ${cg.version} under callgrind, each part alone in a script (the first row: the whole call)\n\n${await parts(cg)}`
          : process.argv.includes("--floors")
          ? `Redis ${cg.version} under callgrind, the least a server-clock decision script can cost\n\n${await floors(cg)}`
          : `Redis ${cg.version} under callgrind, one sliding-log call\n\n${await slidingLogExpiry(cg, CORES[0]!.core)}`,
      );
    } finally {
      cg.stop();
    }
  } else {
    await instructions(arg("decisions", COUNTING.decisions), process.argv.includes("--record"));
  }
} else {
  await main();
}
