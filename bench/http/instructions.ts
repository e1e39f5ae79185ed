// HTTP overhead in machine instructions (a harness, not a test). Each hello-route server of
// bench/http/server.ts runs under valgrind's callgrind with instrumentation off; after a warm-up
// (the JIT has compiled the hot paths) `callgrind_control -i on` starts counting, N requests are
// sent over keep-alive connections, counting stops, and the server's main thread's count is
// divided by N. The main thread runs every line of JS of a request; V8's background compiler
// and GC helper threads, whose work depends on timing, are left out, and so is the kernel (the
// socket writes, the same with or without a limiter). Unlike the timed run (run.ts), other load
// on the machine cannot move these figures: repeats agree within a few thousand instructions.
// The server runs with `--predictable-gc-schedule`: otherwise V8 schedules collections from
// measured speeds, and a server under valgrind on a loaded machine, slower in wall time, would
// count a different amount of collection work.
//   npx tsx bench/http/instructions.ts [--only hono,koa] [--variants none,floodgate,floodgate-otel] [--warm 4000] [--requests 6000] [--baseline <dir>] [--port <n>] [--out <dir>]
// `--port <n>`: each server listens on port n in turn (default: any free port).
// `--out <dir>`: keeps each server's main-thread callgrind output as <dir>/<framework>-<variant>.out
// (for callgrind_annotate), with V8's map of its compiled code beside it (<framework>-<variant>.map,
// from `--perf-basic-prof`: callgrind names JIT code only by address; the map names it).
// `--baseline <dir>` (a copy made by scripts/bench-baseline.sh) adds the variant
// `floodgate-baseline`: the Floodgate server run in that copy's root, so it loads the copy's packages.
// Variants: none | floodgate | peer | headers | floor (see bench/http/server.ts: `headers` only
// sets Floodgate's five default headers, constant values, through the cheapest public API;
// `floor` also reads the method, path and socket address and publishes a result on the request).
import { spawn, spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { Agent, request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { childOf, copies, type Copy } from "../copies.ts";

const args = process.argv.slice(2);
const option = (name: string, fallback: string) => {
  const i = args.indexOf(`--${name}`);
  return i === -1 ? fallback : args[i + 1]!;
};
const WARM = Number(option("warm", "4000"));
const REQUESTS = Number(option("requests", "6000"));
const FRAMEWORKS = option("only", "hono,express,koa").split(",");
const [CURRENT, BASELINE] = copies();
const VARIANTS = option("variants", `none,headers,floor,floodgate,${BASELINE === undefined ? "" : "floodgate-baseline,"}peer`).split(",");
if (VARIANTS.includes("floodgate-baseline") && BASELINE === undefined) throw new Error("variant floodgate-baseline needs --baseline <dir>");
const SERVER = fileURLToPath(new URL("server.ts", import.meta.url));
const CONNECTIONS = 8;
const PORT = option("port", "0");
const OUT = option("out", "");
const PEERS: Record<string, string> = { hono: "hono-rate-limiter", express: "express-rate-limit", koa: "koa-ratelimit" };

if (spawnSync("valgrind", ["--version"]).status !== 0) throw new Error("valgrind is not installed (apt-get install -y valgrind)");

/** Sends `total` GETs over `CONNECTIONS` keep-alive connections, each checked for a 200. */
async function load(port: number, total: number): Promise<void> {
  const agent = new Agent({ keepAlive: true, maxSockets: CONNECTIONS });
  let sent = 0;
  const once = () =>
    new Promise<void>((resolve, reject) => {
      const req = request({ host: "127.0.0.1", port, path: "/", agent }, (res) => {
        res.resume();
        res.on("end", () => (res.statusCode === 200 ? resolve() : reject(new Error(`status ${res.statusCode}`))));
      });
      req.on("error", reject);
      req.end();
    });
  // A server under valgrind on a loaded machine can leave a keep-alive connection idle past its
  // keep-alive timeout (between the warm-up and the counted run, while callgrind_control runs):
  // the server closes it as the agent reuses it, and the request is reset before it reached the
  // handler. Sent again on a new connection, it is counted once.
  const one = async (): Promise<void> => {
    for (let attempt = 1;; attempt++) {
      try {
        return await once();
      } catch (error) {
        const code = (error as { code?: string }).code;
        if (attempt === 3 || (code !== "ECONNRESET" && code !== "EPIPE")) throw error;
      }
    }
  };
  const worker = async () => {
    while (sent < total) {
      sent++;
      await one();
    }
  };
  await Promise.all(Array.from({ length: CONNECTIONS }, worker));
  agent.destroy();
}

/** A server's working directory and environment: the copy's (see copies.ts), on `--port` when given. */
const serverOf = (copy: Copy) => {
  const { cwd, env } = childOf(copy);
  return { cwd, env: { ...env, BENCH_PORT: PORT } };
};

/** Main-thread instructions per request of one server variant. */
async function perRequest(framework: string, variant: string): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), "fg-callgrind-"));
  let running: ReturnType<typeof spawn> | undefined;
  try {
    const child = spawn(
      "valgrind",
      [
        "--tool=callgrind",
        "--instr-atstart=no",
        "--separate-threads=yes",
        `--callgrind-out-file=${join(dir, "cg.out")}`,
        process.execPath,
        "--predictable-gc-schedule",
        ...(OUT === "" ? [] : ["--perf-basic-prof"]),
        "--import",
        "tsx",
        SERVER,
        framework,
        variant === "floodgate-baseline" ? "floodgate" : variant,
      ],
      { ...serverOf(variant === "floodgate-baseline" ? BASELINE! : CURRENT!), stdio: ["ignore", "pipe", "pipe"] },
    );
    running = child;
    let stderr = "";
    child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    const port = await new Promise<number>((resolve, reject) => {
      child.stdout!.on("data", (chunk: Buffer) => {
        const m = /listening on (\d+)/.exec(chunk.toString());
        if (m) resolve(Number(m[1]));
      });
      void exited.then(() => reject(new Error(`${framework}/${variant} exited: ${stderr.slice(-2000)}`)));
    });
    const instrument = (on: boolean) => {
      const r = spawnSync("callgrind_control", ["-i", on ? "on" : "off", String(child.pid)], { encoding: "utf8" });
      if (r.status !== 0) throw new Error(`callgrind_control failed: ${r.stderr}`);
    };
    await load(port, WARM);
    instrument(true);
    await load(port, REQUESTS);
    instrument(false);
    child.kill("SIGTERM");
    await exited;
    // Thread 1 is the main thread (the one that runs JS).
    const main = readFileSync(join(dir, "cg.out-01"), "utf8");
    if (OUT !== "") {
      writeFileSync(join(OUT, `${framework}-${variant}.out`), main);
      const map = `/tmp/perf-${child.pid}.map`;
      if (existsSync(map)) {
        copyFileSync(map, join(OUT, `${framework}-${variant}.map`));
        rmSync(map);
      }
    }
    const m = /^totals: (\d+)/m.exec(main);
    if (!m) throw new Error(`${framework}/${variant}: no totals in callgrind's output`);
    return Number(m[1]) / REQUESTS;
  } finally {
    // A failed measurement must not leave its server running under valgrind.
    if (running !== undefined && running.exitCode === null && running.signalCode === null) running.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  }
}

const NAMES: Record<string, (framework: string) => string> = {
  none: () => "no limiter",
  headers: () => "five constant headers only",
  floor: () => "headers + read request + publish result (floor)",
  floodgate: (f) => `@floodgate/${f}`,
  "floodgate-baseline": (f) => `@floodgate/${f} (baseline)`,
  "floodgate-otel": (f) => `@floodgate/${f} + @floodgate/opentelemetry (no SDK)`,
  "floodgate-legacy": (f) => `@floodgate/${f}, legacy headers only (the peer's three)`,
  peer: (f) => PEERS[f]!,
};
const rows: string[] = [];
for (const framework of FRAMEWORKS) {
  const figures: Record<string, number> = {};
  for (const variant of VARIANTS) {
    figures[variant] = await perRequest(framework, variant);
    console.error(`${framework} ${variant}: ${Math.round(figures[variant]!)} instructions per request (main thread)`);
  }
  const base = figures.none;
  const peerAdded = figures.peer === undefined || base === undefined ? undefined : figures.peer - base;
  for (const variant of VARIANTS) {
    const added = base === undefined || variant === "none" ? undefined : figures[variant]! - base;
    const ofPeer = added === undefined || peerAdded === undefined || variant === "peer" ? "" : (added / peerAdded).toFixed(2);
    const fmt = (n: number | undefined) => (n === undefined ? "" : Math.round(n).toLocaleString("en-US"));
    rows.push(`| ${framework} | ${NAMES[variant]?.(framework) ?? variant} | ${fmt(figures[variant])} | ${fmt(added)} | ${ofPeer} |`);
  }
}
console.log(
  `\nMain-thread instructions per request (callgrind; ${WARM} warm-up requests, then ${REQUESTS} counted; ${CONNECTIONS} keep-alive connections)\n`,
);
console.log("| framework | variant | instructions/request | added | added ÷ peer's added |");
console.log("|---|---|---|---|---|");
for (const row of rows) console.log(row);
