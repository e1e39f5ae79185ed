/**
 * The timed run of `bench/redis.ts` (its default mode): decisions/s, latency and CPU per decision
 * through ioredis, node-redis and @upstash/redis (over the local Upstash bridge), for the floors,
 * Floodgate's kinds and the peers of bench/redis-peers.ts, every ratio taken to the bare floor of
 * the same client in the same round.
 */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { Redis as UpstashRedis } from "@upstash/redis";
import { Redis as IORedis } from "ioredis";
import { createClient } from "redis";
import type { Core } from "./copies.ts";
import { startRedis } from "../test/support/redis-server.ts";
import { startUpstashBridge } from "../packages/upstash-local/src/index.ts";
import { type Decider, floodgate, ioredisPeers, type Kind, KIND_NAMES, nodeRedisPeers, upstashPeers } from "./redis-peers.ts";

export interface TimedOptions {
  decisions: number;
  rounds: number;
  kinds: readonly Kind[];
  /** Redis on this port and the bridge on the next one; "auto": ports the kernel picks. */
  port: number | "auto";
  cores: readonly { suffix: string; core: Core }[];
}

const IDS = Array.from({ length: 1000 }, (_, i) => `user:${i}`);
const FLOOR = "return 1";
const SHAPE = "return {1, 1, 99999999, 1700003600000, 0}";
const CONCURRENCY = [1, 64] as const;

interface Subject extends Decider {
  readonly client: string;
  readonly role: "floor" | "shape" | "floodgate" | "peer";
  readonly kind?: Kind;
  /** The copy of Floodgate (" (baseline)" or ""), for Floodgate rows. */
  readonly suffix?: string;
  /** The row's full name: the decider's name and its client. */
  readonly row: string;
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

async function measure(subject: Subject, concurrency: number, decisions: number, redisPid: number): Promise<Figures> {
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
const always = (): boolean => true;

export async function timed(o: TimedOptions): Promise<void> {
  const t0 = performance.now();
  const redis = await startRedis({ port: o.port });
  const bridge = await startUpstashBridge({
    redis: { host: redis.host, port: redis.port },
    ...(o.port === "auto" ? {} : { port: o.port + 1 }),
  });
  const io = new IORedis(redis.port, redis.host);
  const admin = new IORedis(redis.port, redis.host);
  const node = createClient({ socket: { host: redis.host, port: redis.port } });
  await node.connect();
  const upstash = new UpstashRedis({ url: bridge.url, token: bridge.token, enableTelemetry: false });
  const floorSha = (await admin.script("LOAD", FLOOR)) as string;
  const shapeSha = (await admin.script("LOAD", SHAPE)) as string;
  const shapeArgs = (id: string): [string, string[]] => [`b0:{${id}}`, ["1", "100000000", "3600000"]];

  const clients: {
    client: string;
    floor: (id: string) => Promise<unknown>;
    shape: (id: string) => Promise<unknown>;
    store: (core: Core) => Parameters<Core["createRateLimiter"]>[0]["store"];
    storeName: string;
    peers: Decider[];
  }[] = [
    {
      client: "ioredis",
      floor: () => io.evalsha(floorSha, 0),
      shape: (id) => io.evalsha(shapeSha, 1, shapeArgs(id)[0], ...shapeArgs(id)[1]),
      store: (core) => core.redisStore({ client: io }),
      storeName: "redisStore",
      peers: await ioredisPeers(io),
    },
    {
      client: "node-redis",
      floor: () => node.evalSha(floorSha, { keys: [], arguments: [] }),
      shape: (id) => node.evalSha(shapeSha, { keys: [shapeArgs(id)[0]], arguments: shapeArgs(id)[1] }),
      store: (core) => core.redisStore({ client: node }),
      storeName: "redisStore",
      peers: await nodeRedisPeers(node),
    },
    {
      client: "@upstash/redis via bridge",
      floor: () => upstash.evalsha(floorSha, [], []),
      shape: (id) => upstash.evalsha(shapeSha, [shapeArgs(id)[0]], shapeArgs(id)[1]),
      store: (core) => core.upstashStore({ redis: upstash }),
      storeName: "upstashStore",
      peers: upstashPeers(upstash),
    },
  ];
  const subjects: Subject[] = [];
  clients.forEach((c, ci) => {
    const add = (s: Omit<Subject, "client" | "row">): void => {
      subjects.push({ ...s, client: c.client, row: `${s.name} (${c.client})` });
    };
    add({ name: "floor: bare EVALSHA", role: "floor", decide: c.floor, admits: always });
    add({ name: "floor with Floodgate's call and reply shape", role: "shape", decide: c.shape, admits: always });
    for (const kind of o.kinds) {
      o.cores.forEach(({ suffix, core }, n) => {
        const name = `floodgate ${KIND_NAMES[kind]}, ${c.storeName}${suffix}`;
        add({ ...floodgate(core, kind, c.store(core), `b${ci}${kind[0]}${n}:`, name), role: "floodgate", kind, suffix });
      });
    }
    for (const peer of c.peers) add({ ...peer, role: "peer" });
  });
  const floorOf = (s: Subject): Subject => subjects.find((f) => f.client === s.client && f.role === "floor")!;

  // A warm-up (loads the scripts, creates every identifier's keys), then the Redis commands per
  // decision in that steady state, over one more decision per identifier; every answer checked to admit.
  const commands = new Map<string, string>();
  for (const s of subjects) {
    const n = IDS.length;
    for (let i = 0; i < 2 * n; i++) {
      if (i === n) await admin.config("RESETSTAT");
      const answer = await s.decide(IDS[i % n]!);
      if (!s.admits(answer)) throw new Error(`${s.row}: decision ${i} did not admit: ${JSON.stringify(answer)}`);
    }
    const info = (await admin.info("commandstats")) as string;
    const parts: string[] = [];
    for (const [, cmd, calls, usec] of info.matchAll(/cmdstat_([a-z|]+):calls=(\d+),usec=(\d+)/g)) {
      if (cmd!.startsWith("config") || cmd === "info") continue;
      const perCall = cmd === "evalsha" || cmd === "eval" ? ` (${(Number(usec) / Number(calls)).toFixed(1)} µs in Redis)` : "";
      parts.push(`${cmd} ${+(Number(calls) / n).toFixed(3)}${perCall}`);
    }
    const scriptFirst = (part: string): string => (part.startsWith("eval") ? ` ${part}` : part);
    commands.set(s.row, parts.sort((a, b) => scriptFirst(a).localeCompare(scriptFirst(b))).join(", "));
  }
  console.error(`warm-up and command counts: ${((performance.now() - t0) / 1000).toFixed(0)} s`);

  /** Per subject and concurrency, one figure per round; the ratios to the floor of that round. */
  const results = new Map<string, Record<number, Figures[]>>();
  const ratios = new Map<string, Record<number, number[]>>();
  for (let round = 0; round < o.rounds; round++) {
    const r0 = performance.now();
    for (const concurrency of CONCURRENCY) {
      for (const s of subjects) {
        const figures = await measure(s, concurrency, concurrency === 1 ? Math.ceil(o.decisions / 4) : o.decisions, redis.pid);
        const row = results.get(s.row) ?? { 1: [], 64: [] };
        row[concurrency]!.push(figures);
        results.set(s.row, row);
      }
      for (const s of subjects) {
        const ratio = results.get(s.row)![concurrency]![round]!.perSecond / results.get(floorOf(s).row)![concurrency]![round]!.perSecond;
        const row = ratios.get(s.row) ?? { 1: [], 64: [] };
        row[concurrency]!.push(ratio);
        ratios.set(s.row, row);
      }
    }
    console.error(`round ${round + 1}/${o.rounds}: ${((performance.now() - r0) / 1000).toFixed(0)} s`);
  }

  const summary = (row: string, c: number): Figures => {
    const runs = results.get(row)![c]!;
    const of = (field: keyof Figures): number => median(runs.map((r) => r[field]));
    return {
      perSecond: of("perSecond"),
      meanUs: of("meanUs"),
      p99Us: of("p99Us"),
      clientCpuUs: of("clientCpuUs"),
      redisCpuUs: of("redisCpuUs"),
    };
  };
  const ratio = (s: Subject, c: number): number => median(ratios.get(s.row)![c]!);
  const version = ((await admin.info("server")) as string).match(/redis_version:(\S+)/)?.[1];
  const lines = [
    `Redis ${version}, Node ${process.version}, ${o.decisions} decisions at c=64 (${
      Math.ceil(o.decisions / 4)
    } at c=1), median of ${o.rounds} rounds; "vs floor": decisions/s ÷ the bare floor's through the same client in the same round, median over the rounds`,
    "",
    "| subject | c=1 decisions/s | c=1 mean µs | c=1 p99 µs | c=1 vs floor | c=64 decisions/s | c=64 mean µs | c=64 p99 µs | c=64 vs floor | c=64 CPU µs per decision: client / Redis | Redis commands per decision |",
    "|---|---|---|---|---|---|---|---|---|---|---|",
  ];
  for (const s of subjects) {
    const cells = CONCURRENCY.flatMap((c) => {
      const f = summary(s.row, c);
      return [Math.round(f.perSecond), Math.round(f.meanUs), Math.round(f.p99Us), s.role === "floor" ? "1" : ratio(s, c).toFixed(2)];
    });
    const f64 = summary(s.row, 64);
    cells.push(`${f64.clientCpuUs.toFixed(1)} / ${f64.redisCpuUs.toFixed(1)}`);
    lines.push(`| ${s.row} | ${cells.join(" | ")} | ${commands.get(s.row)} |`);
  }

  // Per client and concurrency: each Floodgate kind's ratio beside the best peer's.
  lines.push(
    "",
    `| client | c | ${
      o.kinds.map((k) => `floodgate ${KIND_NAMES[k]} vs floor`).join(" | ")
    } | best peer vs floor | best peer | every kind ≥ best peer |`,
    `|---|---|${o.kinds.map(() => "---|").join("")}---|---|---|`,
  );
  for (const c of clients) {
    const peers = subjects.filter((s) => s.client === c.client && s.role === "peer");
    for (const { suffix } of o.cores) {
      for (const concurrency of CONCURRENCY) {
        const best = peers.reduce((a, b) => (ratio(b, concurrency) > ratio(a, concurrency) ? b : a));
        const ours = o.kinds.map((kind) =>
          ratio(
            subjects.find((s) => s.client === c.client && s.role === "floodgate" && s.kind === kind && s.suffix === suffix)!,
            concurrency,
          )
        );
        const met = ours.every((r) => r >= ratio(best, concurrency)) ? "yes" : "no";
        lines.push(
          `| ${c.client}${suffix} | ${concurrency} | ${ours.map((r) => r.toFixed(2)).join(" | ")} | ${
            ratio(best, concurrency).toFixed(2)
          } | ${best.name} | ${met} |`,
        );
      }
    }
  }
  console.log(lines.join("\n"));
  console.error(`total: ${((performance.now() - t0) / 1000).toFixed(0)} s`);

  io.disconnect();
  admin.disconnect();
  node.destroy();
  await bridge.stop();
  await redis.stop();
}
