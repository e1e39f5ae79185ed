/**
 * Reservations: what reserve + settle costs beside limit().
 *
 *   npx tsx bench/reservations.ts                    # memory (timed) and Redis (round trips, timed)
 *   npx tsx bench/reservations.ts --instructions     # memory, in machine instructions (valgrind)
 *   npx tsx bench/reservations.ts --instructions --rows reserve-settle,limit-x2   # only these rows
 *
 * Memory store, one token bucket on a hot key (capacity and refill high enough that every call
 * is admitted), rows measured in the same process, interleaved round by round:
 *   limit-x2        two `await limiter.limit(key)`: the budget
 *   reserve-settle  `const r = await limiter.reserve(key, { estimate: 2 }); await r.settle(1)`
 *   limit           one `await limiter.limit(key)`
 * With --instructions each row runs in its own process under callgrind, counted as bench/core-
 * instructions.ts does: (Ir(150,000 calls) − Ir(50,000 calls)) / 100,000, on node
 * --predictable-gc-schedule, so other load on the machine cannot move the figure.
 *
 * Redis (a redis-server started here, ioredis, the server's clock): per reserve and per settle,
 * the script calls counted by the server (INFO commandstats, reset before each phase) and the
 * mean time per call, for a set of three policies (concurrency, fixed window, token bucket).
 */
import { execSync, spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { Redis as IORedis } from "ioredis";
import { concurrency, createRateLimiter, fixedWindow, redisStore, tokenBucket } from "../packages/core/src/index.ts";
import { startRedis } from "../test/support/redis-server.ts";

const flag = (name: string): string | undefined => {
  const i = process.argv.indexOf(`--${name}`);
  return i === -1 ? undefined : process.argv[i + 1];
};

type Row = "limit" | "limit-x2" | "reserve-settle";
const ROWS: readonly Row[] = ["limit", "limit-x2", "reserve-settle"];

/** The measured operation of a row on a fresh memory limiter. */
function rowOf(row: Row): () => Promise<unknown> {
  const limiter = createRateLimiter({ policy: tokenBucket({ capacity: 1e12, refillRate: 1_000_000 }) });
  const key = "hot";
  if (row === "limit") return () => limiter.limit(key);
  if (row === "limit-x2") {
    return async () => {
      await limiter.limit(key);
      return limiter.limit(key);
    };
  }
  return async () => {
    const r = await limiter.reserve(key, { estimate: 2 });
    return r.settle(1);
  };
}

async function loop(fn: () => Promise<unknown>, n: number): Promise<void> {
  for (let i = 0; i < n; i++) await fn();
}

const childRow = flag("row") as Row | undefined;
if (childRow !== undefined) {
  // A child under callgrind: warm up, collect garbage, switch instrumentation on, run.
  const fn = rowOf(childRow);
  await loop(fn, 20_000);
  const gc = (globalThis as { gc?: () => void }).gc;
  gc?.();
  gc?.();
  if (process.env.IB_CTL) execSync(`callgrind_control -i on ${process.pid}`, { stdio: "ignore" });
  await loop(fn, Number(flag("calls")));
  process.exit(0);
}

if (process.argv.includes("--instructions")) {
  const ir = (row: Row, calls: number): number => {
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
      fileURLToPath(import.meta.url),
      "--row",
      row,
      "--calls",
      String(calls),
    ], { encoding: "utf8", env: { ...process.env, IB_CTL: "1" } });
    const m = /Collected : (\d+)/.exec(run.stderr ?? "");
    if (!m) throw new Error(`no instruction count from valgrind (is it installed?): ${run.error ?? run.stderr}`);
    return Number(m[1]);
  };
  console.log("| row (memory store, token bucket, hot key) | instructions per call |\n|---|---|");
  const figures: Record<string, number> = {};
  const rows = flag("rows")?.split(",") as Row[] | undefined ?? ROWS;
  for (const row of rows) {
    if (!ROWS.includes(row)) throw new Error(`unknown row ${row}; expected ${ROWS.join(", ")}`);
    figures[row] = Math.round((ir(row, 150_000) - ir(row, 50_000)) / 100_000);
    console.log(`| ${row} | ${figures[row]!.toLocaleString("en")} |`);
  }
  if (figures["limit-x2"] && figures["reserve-settle"]) {
    console.log(`\nreserve-settle ÷ limit-x2 = ${(figures["reserve-settle"] / figures["limit-x2"]).toFixed(2)}`);
  }
  process.exit(0);
}

// Timed, memory: rounds interleaved so that load moves every row alike.
const rounds = Number(flag("rounds") ?? 5);
const calls = Number(flag("calls") ?? 200_000);
const fns = Object.fromEntries(ROWS.map((row) => [row, rowOf(row)])) as Record<Row, () => Promise<unknown>>;
for (const row of ROWS) await loop(fns[row], 20_000);
const best: Record<string, number> = {};
for (let round = 0; round < rounds; round++) {
  for (const row of ROWS) {
    const start = performance.now();
    await loop(fns[row], calls);
    const ns = ((performance.now() - start) * 1e6) / calls;
    best[row] = Math.min(best[row] ?? Infinity, ns);
  }
}
console.log(
  `| row (memory store, token bucket, hot key; best of ${rounds} rounds × ${calls.toLocaleString("en")}) | ns per call |\n|---|---|`,
);
for (const row of ROWS) console.log(`| ${row} | ${best[row]!.toFixed(0)} |`);
console.log(`\nreserve-settle ÷ limit-x2 = ${(best["reserve-settle"]! / best["limit-x2"]!).toFixed(2)}\n`);

// Redis: round trips counted at the server, and time per call.
const redis = await startRedis();
const client = new IORedis(redis.port, redis.host);
const admin = new IORedis(redis.port, redis.host);
try {
  const limiter = createRateLimiter({
    policy: [concurrency({ limit: 1_000_000 }), fixedWindow({ limit: 1e8, window: "1h" }), tokenBucket({ capacity: 1e9, refillRate: 1e6 })],
    store: redisStore({ client }),
  });
  const n = Number(flag("redis-calls") ?? 2000);
  await (await limiter.reserve("warm")).settle(1);
  const count = async (): Promise<number> => {
    const info = (await admin.info("commandstats")) as string;
    let total = 0;
    for (const [, name, c] of info.matchAll(/cmdstat_([a-z|]+):calls=(\d+)/g)) {
      if (name === "evalsha" || name === "eval") total += Number(c);
    }
    return total;
  };
  await admin.config("RESETSTAT");
  let start = performance.now();
  const held = [];
  for (let i = 0; i < n; i++) held.push(await limiter.reserve(`k${i % 50}`, { estimate: 10 }));
  const reserveMs = (performance.now() - start) / n;
  const reserveCalls = (await count()) / n;
  await admin.config("RESETSTAT");
  start = performance.now();
  for (const r of held) await r.settle(7);
  const settleMs = (performance.now() - start) / n;
  const settleCalls = (await count()) / n;
  await admin.config("RESETSTAT");
  start = performance.now();
  for (let i = 0; i < n; i++) await limiter.peek(`k${i % 50}`);
  const peekMs = (performance.now() - start) / n;
  console.log(
    `| Redis (ioredis, 3 policies, ${
      n.toLocaleString("en")
    } calls each) | script calls at the server per call | ms per call |\n|---|---|---|`,
  );
  console.log(`| reserve | ${reserveCalls} | ${reserveMs.toFixed(3)} |`);
  console.log(`| settle | ${settleCalls} | ${settleMs.toFixed(3)} |`);
  console.log(`| peek (for scale) | 1 | ${peekMs.toFixed(3)} |`);
} finally {
  client.disconnect();
  admin.disconnect();
  await redis.stop();
}
