/**
 * Leased mode benchmark: real OS processes, counted at the server, checked by an independent
 * replay. Run: `npm run bench:leases` (node --import tsx bench/leases.ts [--quick] [--seconds 20]
 * [--instances 1,4,16,100] [--only steady,latency,...] [--modes leased,exact,upstash-fixed,
 * upstash-cached] [--lease-ms 5000]).
 *
 * Starts its own redis-server and the local Upstash bridge in front of it (and, for the latency
 * variant, a proxy adding 20 ms to every bridge request), then, per run, N worker processes
 * (bench/leases-worker.ts, bundled once with esbuild so that 100 of them start quickly), each
 * an instance with its own limiter deciding on one hot key at its share of the load. Counted at
 * the server: HTTP requests the bridge served and Redis `INFO commandstats` (EVALSHA + EVAL).
 * Every decision is logged by its process with CLOCK_MONOTONIC (process.hrtime) and mapped to
 * the Redis server's clock (offset measured with TIME, lowest round trip of 50); every admission
 * is replayed through the exact algorithm by test/support/exact-checker.ts. A decision served
 * by the store is placed in the window the store charged it in (from its resetAt); one served
 * from a lease at the time it returned, on this machine's one clock. Store requests are counted
 * twice: once every instance has made its decisions, and again after their exit `flush()`es
 * (which return unspent units: a cost a long-lived instance pays once). "p50 sync" is the
 * limiter's own time for the decisions it answered synchronously: from a lease, or, in the
 * "memory" mode (exact, each instance on a memory store of its own: no shared limit), from the
 * memory store, the floor of a synchronous decision in a process deciding at that rate; "p50 all" is the
 * time the caller waited for every decision, the store's included.
 *
 * Scenarios: steady 80% of the limit at 1, 4, 16 and 100 instances in leased and exact mode and
 * with @upstash/ratelimit's fixedWindow and cachedFixedWindow; with 16 instances: bursts of 3×
 * the limit (fixed window 1,000 per 10 s, so that a short run reaches the limit), the multi-policy set (10/s AND 1,000/day), an adversary spending in the last 40 ms
 * of every window (fixed window 1,000 per 10 s, so that a run holds window ends), one instance
 * whose clocks run 0.1% slow, SIGSTOP of a lease holder past its deadline then SIGCONT, SIGKILL
 * of 10% of the instances, a Redis restart; the 20 ms latency variant at 16 instances.
 */
import { execFileSync, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { Redis as IORedis } from "ioredis";
import { startUpstashBridge } from "../packages/upstash-local/src/index.ts";
import { type RedisInstance, startRedis } from "../test/support/redis-server.ts";
import { type Admission, check, describePolicy } from "../test/support/exact-checker.ts";
import { policiesOf, type WorkerConfig } from "./leases-worker.ts";

const args = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : undefined;
};
const quick = args.includes("--quick");
const SECONDS = Number(flag("seconds") ?? (quick ? 6 : 20));
const INSTANCES = (flag("instances") ?? (quick ? "1,4" : "1,4,16,100")).split(",").map(Number);
const ONLY = flag("only")?.split(",");
const MODES = flag("modes")?.split(",");
const LEASE_MS = Number(flag("lease-ms") ?? 5000);
const HOT_RATE = 6000 / 60; // the limit per second

const hrUs = (): number => Number(process.hrtime.bigint() / 1000n);
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

interface Run {
  label: string;
  mode: WorkerConfig["mode"];
  policy: WorkerConfig["policy"];
  instances: number;
  /** Total decisions per second offered, spread evenly over the instances. */
  rate: number;
  latencyMs?: number;
  roles?: Partial<Record<number, WorkerConfig["role"]>>;
  /** During the run: signals, a restart. */
  event?: "sigstop" | "sigkill" | "restart";
}

interface RunResult {
  run: Run;
  decisions: number;
  admitted: number;
  denied: number;
  errors: number;
  /** Counted at the server while the instances decided, then with their exit flushes. */
  bridgeRequests: number;
  scriptCalls: number;
  perThousand: number;
  bridgeWithFlush: number;
  perThousandWithFlush: number;
  violations: number;
  violationsDetail: string[];
  /** The limiter's own time for the decisions it answered synchronously. */
  p50SyncUs: number;
  p50StoreUs: number;
  p50AllUs: number;
  leaseServed: number;
  /** Of those, decisions served from a lease only after waiting for a store call in flight. */
  leaseWaited: number;
  strandedLeases: number;
  strandedUnits: number;
  deaths: number;
  restartViolations?: number;
  firstError: string;
}

function percentile(values: number[], q: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

async function main(): Promise<void> {
  const dir = mkdtempSync(path.join(os.tmpdir(), "fg-bench-leases-"));
  // One bundle of the worker: 100 processes each compiling TypeScript would take minutes of CPU.
  const worker = path.join(dir, "worker.mjs");
  execFileSync(
    path.resolve("node_modules/.bin/esbuild"),
    [
      "bench/leases-worker.ts",
      "--bundle",
      "--platform=node",
      "--format=esm",
      `--outfile=${worker}`,
      "--banner:js=import { createRequire } from 'module'; const require = createRequire(import.meta.url);",
      "--log-level=warning",
    ],
    { stdio: "inherit" },
  );
  const redis: RedisInstance = await startRedis();
  const admin = new IORedis({ host: redis.host, port: redis.port, lazyConnect: false, maxRetriesPerRequest: 50 });
  admin.on("error", () => undefined); // reconnects after the restart scenario
  const bridge = await startUpstashBridge({ redis: { host: redis.host, port: redis.port }, maxIdleConnections: 128 });
  const proxy = await startDelayProxy(bridge.url, 20);
  const results: RunResult[] = [];
  try {
    if (ONLY === undefined || ONLY.includes("cost")) console.log(await decisionCost(bridge));
    const runs: Run[] = [];
    const want = (name: string) => ONLY === undefined || ONLY.includes(name);
    if (want("steady")) {
      for (const n of INSTANCES) {
        for (const mode of ["leased", "exact", "memory", "upstash-fixed", "upstash-cached"] as const) {
          if (MODES !== undefined && !MODES.includes(mode)) continue;
          runs.push({ label: `steady 80%, ${n} instances`, mode, policy: "hot", instances: n, rate: 0.8 * HOT_RATE });
        }
      }
    }
    const big = quick ? 4 : 16;
    const scen = (label: string, extra: Partial<Run>, modes: Run["mode"][] = ["leased", "exact"]) => {
      for (const mode of modes) {
        if (MODES === undefined || MODES.includes(mode)) {
          runs.push({ label, mode, policy: "hot", instances: big, rate: 0.8 * HOT_RATE, ...extra });
        }
      }
    };
    if (want("latency")) {
      scen(`steady 80%, ${big} instances, +20 ms per request`, { latencyMs: 20 }, ["leased", "exact", "upstash-fixed", "upstash-cached"]);
    }
    if (want("burst")) {
      scen(`bursts of 3× the limit (1,000 per 10 s), ${big} instances`, { policy: "ten", rate: 3 * 100 }, [
        "leased",
        "exact",
        "upstash-fixed",
        "upstash-cached",
      ]);
    }
    if (want("multi")) scen(`10/s AND 1,000/day at 8/s, ${big} instances`, { policy: "multi", rate: 8 });
    if (want("adversary")) {
      scen(`adversary at window ends (1,000 per 10 s, offered 120%), ${big} instances`, {
        policy: "ten",
        rate: 1.2 * 100,
        roles: { 0: "adversary" },
      });
    }
    if (want("slow")) scen(`one clock 0.1% slow, ${big} instances`, { roles: { 0: "slow-clock" } });
    if (want("sigstop")) scen(`SIGSTOP of a holder past its deadline, ${big} instances`, { event: "sigstop" });
    if (want("sigkill")) scen(`SIGKILL of 10% of ${big} instances`, { event: "sigkill" });
    if (want("restart")) scen(`Redis restart, ${big} instances`, { event: "restart" });

    for (const run of runs) {
      const r = await runOne(run, { dir, worker, redis, admin, bridge, proxy });
      results.push(r);
      console.log(row(r));
    }
  } finally {
    proxy.server.close();
    await bridge.stop();
    admin.disconnect();
    await redis.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  console.log("\n" + table(results));
}

interface Env {
  dir: string;
  worker: string;
  redis: RedisInstance;
  admin: IORedis;
  bridge: Awaited<ReturnType<typeof startUpstashBridge>>;
  proxy: { url: string; server: http.Server };
}

let runIndex = 0;

async function runOne(run: Run, env: Env): Promise<RunResult> {
  const { admin, bridge } = env;
  const prefix = `b${runIndex++}-${Date.now().toString(36)}:`;
  const offsetUs = await serverOffset(admin);
  await admin.config("RESETSTAT");
  bridge.resetCounters();
  let startUs = 0;
  const outs: string[] = [];
  const children = Array.from({ length: run.instances }, (_, i) => {
    const out = path.join(env.dir, `${prefix.replace(":", "")}-${i}.log`);
    outs.push(out);
    const config: WorkerConfig = {
      url: run.latencyMs === undefined ? bridge.url : env.proxy.url,
      token: bridge.token,
      mode: run.mode,
      policy: run.policy,
      prefix,
      ratePerSec: run.rate / run.instances,
      startUs,
      durationMs: SECONDS * 1000,
      seed: 1000 + i,
      role: run.roles?.[i] ?? "normal",
      leaseMs: LEASE_MS,
      out,
    };
    return spawn(process.execPath, [env.worker, JSON.stringify(config)], { stdio: ["ignore", "ignore", "inherit", "ipc"] });
  });
  await Promise.all(children.map((child) => new Promise<void>((resolve) => child.once("message", () => resolve()))));
  startUs = hrUs() + 300_000;
  for (const child of children) child.send({ startUs });
  const exits = children.map((child) => new Promise<void>((resolve) => child.once("exit", () => resolve())));
  const decided = children.map((child) => new Promise<void>((resolve) => child.once("message", () => resolve())));
  let deaths = 0;
  let restartAtUs: number | undefined;
  if (run.event !== undefined) {
    await sleep((startUs - hrUs()) / 1000 + (SECONDS * 1000) / 3);
    if (run.event === "sigstop") {
      // Past the lease's deadline: its life is at most LEASE_MS.
      children[0]!.kill("SIGSTOP");
      await sleep(LEASE_MS + 1500);
      children[0]!.kill("SIGCONT");
    } else if (run.event === "sigkill") {
      deaths = Math.max(1, Math.round(run.instances / 10));
      for (let i = 0; i < deaths; i++) children[i]!.kill("SIGKILL");
    } else {
      restartAtUs = hrUs() + offsetUs;
      await env.redis.restart();
    }
  }
  // Counted at the server: once every instance has decided (or died), then after the exit flushes.
  await Promise.all(children.map((_, i) => Promise.race([decided[i], exits[i]])));
  const scriptCalls = await commandCalls(admin);
  const bridgeRequests = bridge.requests.total;
  for (const child of children) if (child.connected) child.send("flush");
  await Promise.all(exits);
  const bridgeWithFlush = bridge.requests.total;
  // Leases whose ledger record is still there were never returned: those of the dead.
  let strandedLeases = 0;
  let strandedUnits = 0;
  if (run.mode === "leased") {
    let cursor = "0";
    do {
      const [next, keys] = await admin.scan(cursor, "MATCH", `${prefix}*:l:*`, "COUNT", 1000);
      cursor = next;
      for (const key of keys) {
        const value = await admin.get(key);
        if (value === null) continue;
        const fields = value.split(",").map(Number);
        const count = policiesOf(run.policy).length;
        strandedLeases++;
        strandedUnits += fields[1 + 5 * count]!;
      }
    } while (cursor !== "0");
  }
  const policies = policiesOf(run.policy);
  const admissions: Admission[] = [];
  const syncLatency: number[] = [];
  const storeLatency: number[] = [];
  const all: number[] = [];
  let decisions = 0;
  let denied = 0;
  let errors = 0;
  let leaseServed = 0;
  let leaseWaited = 0;
  let firstError = "";
  outs.forEach((out, who) => {
    let text = "";
    try {
      text = readFileSync(out, "utf8");
    } catch {
      return;
    }
    for (const line of text.split("\n")) {
      if (line === "") continue;
      let entry: unknown[];
      try {
        entry = JSON.parse(line) as unknown[];
      } catch {
        continue; // a line cut by SIGKILL
      }
      const kind = entry[0];
      if (kind === "done") continue;
      if (kind === "e") {
        if (errors === 0) firstError = String(entry[3]);
        errors++;
        continue;
      }
      decisions++;
      const t0 = entry[1] as number;
      const t1 = entry[2] as number;
      const source = entry[3] as string;
      all.push(t1 - t0);
      // The limiter's own time for a decision it answered synchronously (from a lease, or the
      // memory store of the floor's runs).
      const syncUs = entry[5] as number | undefined;
      const sync = syncUs !== undefined && syncUs >= 0;
      if (sync) syncLatency.push(syncUs);
      if (source === "lease") {
        leaseServed++;
        if (!sync) leaseWaited++;
      } else if (!sync) storeLatency.push(t1 - t0);
      if (kind === "d") {
        denied++;
        continue;
      }
      const resets = entry[4] as number[];
      let atUs = t1 + offsetUs;
      // (A reset of 0 is @upstash/ratelimit's answer without a store call: it names no window.)
      if (source !== "lease" && resets.every((r) => r > 0)) {
        // The store charged it in the windows it names: place it inside all of them.
        let lo = -Infinity;
        let hi = Infinity;
        policies.forEach((p, i) => {
          const endUs = (resets[i] ?? resets[0]!) * 1000;
          lo = Math.max(lo, endUs - p.windowMs * 1000);
          hi = Math.min(hi, endUs - 1);
        });
        atUs = Math.min(Math.max(atUs, lo), hi);
      }
      admissions.push({ atUs, cost: 1, by: who });
    }
  });
  const checked = policies.map(describePolicy);
  let violations = check(checked, admissions);
  let restartViolations: number | undefined;
  if (restartAtUs !== undefined) {
    // The replay with the state lost at the restart, as the store lost it: exact mode's own
    // over-admission across a restart is not counted; what leases spent after it is.
    const before = admissions.filter((a) => a.atUs < restartAtUs!);
    const after = admissions.filter((a) => a.atUs >= restartAtUs!);
    restartViolations = check(checked, after).length;
    violations = check(checked, before);
  }
  return {
    run,
    decisions,
    admitted: admissions.length,
    denied,
    errors,
    bridgeRequests,
    scriptCalls,
    perThousand: decisions === 0 ? NaN : (bridgeRequests * 1000) / decisions,
    bridgeWithFlush,
    perThousandWithFlush: decisions === 0 ? NaN : (bridgeWithFlush * 1000) / decisions,
    violations: violations.length,
    violationsDetail: violations.slice(0, 3).map((v) => v.detail),
    firstError,
    p50SyncUs: percentile(syncLatency, 0.5),
    p50StoreUs: percentile(storeLatency, 0.5),
    p50AllUs: percentile(all, 0.5),
    leaseServed,
    leaseWaited,
    strandedLeases,
    strandedUnits,
    deaths,
    ...(restartViolations === undefined ? {} : { restartViolations }),
  };
}

/**
 * What a decision served from a lease costs, in this process with nothing else running in it:
 * one limiter holding a large lease (fixed window of 10,000,000 per hour), 200,000 `decide()`
 * calls each timed with hrtime, against exact mode's decisions through the bridge.
 */
async function decisionCost(bridge: Env["bridge"]): Promise<string> {
  const { Redis } = await import("@upstash/redis");
  const { createRateLimiter, fixedWindow, upstashStore } = await import("../packages/core/src/index.ts");
  const redis = new Redis({ url: bridge.url, token: bridge.token, enableAutoPipelining: false });
  const policy = fixedWindow({ limit: 10_000_000, window: "1h" });
  const prefix = `cost-${Date.now().toString(36)}:`;
  const leased = createRateLimiter({ policy, store: upstashStore({ redis }), prefix, mode: "leased", leaseMs: 60_000 });
  const exact = createRateLimiter({ policy, store: upstashStore({ redis }), prefix: `${prefix}x:`, mode: "exact" });
  const times: number[] = [];
  let served = 0;
  for (let i = 0; i < 200_000; i++) {
    const t0 = process.hrtime.bigint();
    const answer = leased.decide("hot");
    const d = answer instanceof Promise ? await answer : answer;
    const t1 = process.hrtime.bigint();
    if (d.source === "lease") {
      served++;
      times.push(Number(t1 - t0) / 1000);
    }
  }
  const exactTimes: number[] = [];
  for (let i = 0; i < 500; i++) {
    const t0 = process.hrtime.bigint();
    await exact.limit("hot");
    exactTimes.push(Number(process.hrtime.bigint() - t0) / 1000);
  }
  await leased.flush();
  return `decision cost: served from a lease ${served} of 200000, p50 ${fmt(percentile(times, 0.5), 2)} µs, p99 ${
    fmt(percentile(times, 0.99), 2)
  } µs; exact through the bridge p50 ${fmt(percentile(exactTimes, 0.5), 0)} µs, p99 ${fmt(percentile(exactTimes, 0.99), 0)} µs`;
}

/** Redis server time minus this machine's CLOCK_MONOTONIC, µs: the sample with the lowest round trip of 50. */
async function serverOffset(admin: IORedis): Promise<number> {
  let best = Infinity;
  let offset = 0;
  for (let i = 0; i < 50; i++) {
    const before = hrUs();
    const [s, us] = (await admin.time()) as [number | string, number | string];
    const after = hrUs();
    if (after - before < best) {
      best = after - before;
      offset = Number(s) * 1e6 + Number(us) - (before + after) / 2;
    }
  }
  return offset;
}

async function commandCalls(admin: IORedis): Promise<number> {
  const info = (await admin.info("commandstats")) as string;
  let calls = 0;
  for (const [, name, n] of info.matchAll(/cmdstat_([a-z|]+):calls=(\d+)/g)) if (name === "evalsha" || name === "eval") calls += Number(n);
  return calls;
}

/** An HTTP proxy in front of the bridge that holds every request `ms` before forwarding it. */
async function startDelayProxy(target: string, ms: number): Promise<{ url: string; server: http.Server }> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
  const to = new URL(target);
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      setTimeout(() => {
        const forward = http.request(
          { host: to.hostname, port: to.port, path: req.url, method: req.method, headers: req.headers, agent },
          (answer) => {
            res.writeHead(answer.statusCode ?? 502, answer.headers);
            answer.pipe(res);
          },
        );
        forward.on("error", () => {
          res.writeHead(502);
          res.end();
        });
        forward.end(Buffer.concat(chunks));
      }, ms);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  return { url: `http://127.0.0.1:${port}${to.pathname === "/" ? "" : to.pathname}`, server };
}

const fmt = (n: number, d = 1): string => (Number.isFinite(n) ? n.toFixed(d) : "—");

function row(r: RunResult): string {
  return `${r.run.label} | ${r.run.mode} | decisions ${r.decisions} | admitted ${r.admitted} | denied ${r.denied} | errors ${r.errors} | bridge ${r.bridgeRequests} (${
    fmt(r.perThousand)
  }/1000; with exit flushes ${r.bridgeWithFlush}, ${
    fmt(r.perThousandWithFlush)
  }/1000) | scripts ${r.scriptCalls} | lease-served ${r.leaseServed} (${r.leaseWaited} after a wait) | p50 sync ${
    fmt(r.p50SyncUs, 0)
  } µs, store ${fmt(r.p50StoreUs, 0)} µs, all ${fmt(r.p50AllUs, 0)} µs | violations ${r.violations}${
    r.restartViolations === undefined ? "" : ` (after the restart: ${r.restartViolations})`
  }${r.violationsDetail.length ? ` [${r.violationsDetail.join("; ")}]` : ""}${r.errors ? ` | first error: ${r.firstError}` : ""}${
    r.run.mode === "leased" ? ` | stranded ${r.strandedLeases} leases / ${r.strandedUnits} units, deaths ${r.deaths}` : ""
  }`;
}

function table(results: RunResult[]): string {
  const lines = [
    "| scenario | mode | decisions | admitted | of exact mode's | denied | errors | bridge requests | per 1,000 decisions | with exit flushes | EVALSHA+EVAL | from leases | p50 sync µs | p50 store µs | p50 all µs | checker violations | stranded leases (units) |",
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
  ];
  for (const r of results) {
    // Admissions beside exact mode's on the same scenario (same seeds, so the same arrivals).
    const exact = results.find((e) => e.run.mode === "exact" && e.run.label === r.run.label);
    const share = exact === undefined || r.run.mode === "exact" || exact.admitted === 0
      ? ""
      : `${fmt((100 * r.admitted) / exact.admitted)}%`;
    lines.push(
      `| ${r.run.label} | ${r.run.mode} | ${r.decisions} | ${r.admitted} | ${share} | ${r.denied} | ${r.errors} | ${r.bridgeRequests} | ${
        fmt(r.perThousand)
      } | ${fmt(r.perThousandWithFlush)} | ${r.scriptCalls} | ${r.leaseServed} | ${fmt(r.p50SyncUs, 0)} | ${fmt(r.p50StoreUs, 0)} | ${
        fmt(r.p50AllUs, 0)
      } | ${r.violations}${r.restartViolations === undefined ? "" : ` (+${r.restartViolations} after the restart)`} | ${
        r.run.mode === "leased" ? `${r.strandedLeases} (${r.strandedUnits})${r.deaths ? `, ${r.deaths} deaths` : ""}` : ""
      } |`,
    );
  }
  return lines.join("\n");
}

mkdirSync("bench/results", { recursive: true });
await main();
