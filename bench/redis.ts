/**
 * Redis store benchmark (a harness, not a timed test). Run: `npm run bench:redis`
 * (node --import tsx bench/redis.ts [--decisions 20000] [--rounds 3] [--kinds fixed,token,sliding]
 * [--port 7430]).
 *
 * Starts its own redis-server (on `--port`, else a port the kernel picks; the local Upstash
 * bridge in front of it on the next port), then, for each client (ioredis, node-redis, and
 * @upstash/redis through the bridge), measures per-decision latency (mean, p99) and decisions/s
 * at concurrency 1 and 64 (bench/redis-timed.ts):
 *  - the floor: a bare `EVALSHA` of a script that returns 1, through the same client (the cost
 *    of one round trip, which no one-script-per-decision store can beat);
 *  - the floor with Floodgate's call shape, through the same client: one key, three ARGV, a
 *    script that only returns a five-integer array like Floodgate's result: what the call and
 *    reply cost before any limiter work;
 *  - Floodgate's store with each of `--kinds` (fixed window, token bucket, sliding window; all
 *    three by default), a limit of 1e8 per hour: every decision admits; 1,000 identifiers in a
 *    cycle; deny cache on, as by default, though it never hits here;
 *  - the peers that run on that client (bench/redis-peers.ts): rate-limiter-flexible
 *    `RateLimiterRedis` and rate-limit-redis (ioredis, node-redis), @upstash/ratelimit's fixed
 *    window, sliding window and token bucket (@upstash/redis); same kind of load.
 * Concurrency c = c loops each awaiting one decision at a time. Subjects are interleaved within a
 * round; each figure is the median of `--rounds` rounds, and each "vs floor" the median of the
 * rounds' ratios to the bare floor of the same client in the same round. A second table puts, per
 * client and concurrency, each Floodgate kind's ratio beside the best peer's. Redis commands per
 * decision come from `INFO commandstats`, reset after a warm-up of one decision per identifier
 * (scripts loaded, keys created), over one more decision per identifier (every answer of both
 * checked to admit); commands inside scripts listed separately. CPU per decision at c=64
 * (Linux): this process's CPU time (the client; for Upstash also the bridge, which runs in this
 * process) and redis-server's (from /proc), both far steadier than decisions/s on a shared
 * machine. Round times go to stderr.
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
import { existsSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { RateLimiterRedis } from "rate-limiter-flexible";
import { BASELINE_SUFFIX, copies, type Core, loadCore } from "./copies.ts";
import { callgrindAvailable, startCallgrindRedis } from "../test/support/redis-callgrind.ts";
import { floors } from "./redis-floors.ts";
import { parts, slidingLogExpiry } from "./redis-parts.ts";
import { kindsOf } from "./redis-peers.ts";
import {
  COUNTED_IDS,
  COUNTING,
  FIRST_DB,
  type InstructionRecord,
  instructionSubjects,
  RECORD_FILE,
  SUBJECT_NAMES,
} from "./redis-subjects.ts";
import { timed } from "./redis-timed.ts";

const arg = (name: string, fallback: number): number => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const FLOOR = "return 1";
/** Each copy of Floodgate measured: the working tree's, then the baseline's with `--baseline`. */
const CORES: { suffix: string; core: Core }[] = [];
for (const copy of copies()) CORES.push({ suffix: copy.suffix, core: await loadCore(copy) });

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
  const port = arg("port", NaN);
  await timed({
    decisions: arg("decisions", 20_000),
    rounds: arg("rounds", 3),
    kinds: kindsOf(),
    port: Number.isInteger(port) ? port : "auto",
    cores: CORES,
  });
}
