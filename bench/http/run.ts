// HTTP overhead benchmark (a harness, not a test): for each framework, a hello route without a
// limiter, with Floodgate and with the framework's usual peer, measured with autocannon on
// loopback in the same run, the three alternated round by round. Prints a Markdown table.
//   npx tsx bench/http/run.ts [--rounds 3] [--seconds 5] [--only hono|express|koa] [--floors] [--otel] [--baseline <dir>]
// `--baseline <dir>` (a copy of an earlier commit, made by scripts/bench-baseline.sh) adds a
// "floodgate (baseline)" variant per framework: the same server script, run in that copy's root
// so that `@floodgate/<framework>` and the core it imports are the copy's (see bench/copies.ts),
// alternated with the others in every round.
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import autocannon from "autocannon";
import { childOf, copies } from "../copies.ts";

const args = process.argv.slice(2);
const option = (name: string, fallback: number) => {
  const i = args.indexOf(`--${name}`);
  return i === -1 ? fallback : Number(args[i + 1]);
};
const ROUNDS = option("rounds", 3);
const SECONDS = option("seconds", 5);
const only = args.indexOf("--only");
const FRAMEWORKS = (["hono", "express", "koa"] as const).filter((f) => only === -1 || args[only + 1] === f);
// `--floors` adds the two reference middlewares of bench/http/server.ts: `headers` (five constant
// headers shaped like Floodgate's defaults, set the way @floodgate/<framework> sets them) and
// `floor` (those, plus reading what any limiter reads): what no limiter with these headers can beat.
const [CURRENT, BASELINE] = copies();
const VARIANTS = [
  "none",
  "floodgate",
  ...(BASELINE === undefined ? [] : ["floodgate-baseline"]),
  // `--otel`: Floodgate with @floodgate/opentelemetry and no SDK registered (the API's no-op instruments).
  ...(args.includes("--otel") ? ["floodgate-otel"] : []),
  "peer",
  ...(args.includes("--floors") ? ["headers", "floor"] : []),
];
const LABELS: Record<string, string> = {
  none: "no limiter",
  "floodgate-otel": "Floodgate + @floodgate/opentelemetry (no SDK)",
  headers: "floor: the five default headers only",
  floor: "floor: headers + reading method, path, socket",
};
const SERVER = fileURLToPath(new URL("server.ts", import.meta.url));
const PEERS = { hono: "hono-rate-limiter", express: "express-rate-limit", koa: "koa-ratelimit" };

async function measure(framework: string, variant: string): Promise<{ rps: number; p99: number; cpuUs: number }> {
  // node itself (not the tsx wrapper), so the signal asking for CPU time reaches the server.
  const baseline = variant === "floodgate-baseline";
  const { cwd, env } = childOf(baseline ? BASELINE! : CURRENT!);
  const child = spawn(process.execPath, ["--import", "tsx", SERVER, framework, baseline ? "floodgate" : variant], {
    cwd,
    env,
    stdio: ["ignore", "pipe", "inherit"],
  });
  try {
    const port = await new Promise<number>((resolve, reject) => {
      child.stdout!.on("data", (chunk: Buffer) => {
        const m = /listening on (\d+)/.exec(chunk.toString());
        if (m) resolve(Number(m[1]));
      });
      child.once("exit", (code) => reject(new Error(`${framework}/${variant} exited ${code}`)));
    });
    const url = `http://127.0.0.1:${port}/`;
    const cpu = () =>
      new Promise<number>((resolve) => {
        const onData = (chunk: Buffer) => {
          const m = /cpu (\d+)/.exec(chunk.toString());
          if (m) {
            child.stdout!.off("data", onData);
            resolve(Number(m[1]));
          }
        };
        child.stdout!.on("data", onData);
        child.kill("SIGUSR2");
      });
    await autocannon({ url, connections: 10, duration: 1 }); // warm-up (JIT)
    const before = await cpu();
    const result = await autocannon({ url, connections: 10, duration: SECONDS });
    const cpuUs = (await cpu()) - before;
    if (result.non2xx > 0 || result.errors > 0) {
      throw new Error(`${framework}/${variant}: ${result.non2xx} non-2xx, ${result.errors} errors`);
    }
    return {
      rps: result.requests.average,
      p99: result.latency.p99,
      cpuUs: cpuUs / (result.requests as unknown as { total: number }).total,
    };
  } finally {
    child.kill("SIGTERM");
  }
}

const samples: Record<string, { rps: number[]; p99: number[]; cpu: number[] }> = {};
for (let round = 0; round < ROUNDS; round++) {
  for (const framework of FRAMEWORKS) {
    // Alternate the order each round so drift (thermal, other load) does not favour one variant.
    const order = round % 2 === 0 ? VARIANTS : [...VARIANTS].reverse();
    for (const variant of order) {
      const r = await measure(framework, variant);
      const key = `${framework}/${variant}`;
      (samples[key] ??= { rps: [], p99: [], cpu: [] }).rps.push(r.rps);
      samples[key].p99.push(r.p99);
      samples[key].cpu.push(r.cpuUs);
      console.error(`round ${round + 1} ${key}: ${Math.round(r.rps)} req/s, p99 ${r.p99} ms, server CPU ${r.cpuUs.toFixed(1)} µs/request`);
    }
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
console.log(
  `| framework | variant | req/s (median of ${ROUNDS}) | p99 ms | % of unlimited | added µs/request (wall) | server CPU µs/request | added server CPU µs/request |`,
);
console.log("|---|---|---|---|---|---|---|---|");
for (const framework of FRAMEWORKS) {
  const base = median(samples[`${framework}/none`]!.rps);
  const baseCpu = median(samples[`${framework}/none`]!.cpu);
  for (const variant of VARIANTS) {
    const s = samples[`${framework}/${variant}`]!;
    const rps = median(s.rps);
    const cpu = median(s.cpu);
    const name = variant === "floodgate"
      ? "@floodgate/" + framework
      : variant === "floodgate-baseline"
      ? `@floodgate/${framework} (baseline)`
      : variant === "peer"
      ? PEERS[framework as keyof typeof PEERS]
      : LABELS[variant]!;
    const added = variant === "none" ? "" : (1e6 / rps - 1e6 / base).toFixed(1);
    const addedCpu = variant === "none" ? "" : (cpu - baseCpu).toFixed(1);
    console.log(
      `| ${framework} | ${name} | ${Math.round(rps)} | ${median(s.p99)} | ${((rps / base) * 100).toFixed(0)}% | ${added} | ${
        cpu.toFixed(1)
      } | ${addedCpu} |`,
    );
  }
}
