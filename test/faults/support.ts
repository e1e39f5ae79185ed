/**
 * The store-fault suite's machinery: a redis-server, the local Upstash bridge behind the fault
 * proxy, the app process (fault-apps.ts, forked), and closed-loop HTTP clients that record every
 * request's start, latency and status: in the test process, or in a process of their own
 * (client-process.ts) so that their work delays neither the apps nor the test.
 */
import { type ChildProcess, fork } from "node:child_process";
import http from "node:http";
import { fileURLToPath } from "node:url";
import { type RedisInstance, startRedis } from "../support/redis-server.ts";
import type { Fault, FaultProxyCounts } from "../support/fault-proxy.ts";
import type { AppInfo, Command, StatsReply } from "./shared.ts";

/** `FLOODGATE_LONG=1`: more clients and longer faults (a soak before a release, not for CI). */
export const LONG = process.env.FLOODGATE_LONG === "1";

const APPS = fileURLToPath(new URL("./fault-apps.ts", import.meta.url));
const BRIDGE = fileURLToPath(new URL("./bridge-process.ts", import.meta.url));
const CLIENTS = fileURLToPath(new URL("./client-process.ts", import.meta.url));

/** A forked tsx process with IPC, and a way to ask it something and wait for its answer. */
function forkTs(
  file: string,
  env: Record<string, string>,
): { child: ChildProcess; ask<T>(command: object, reply: string): Promise<T>; ready: Promise<any> } {
  const child = fork(file, [], {
    execArgv: ["--import", "tsx"],
    env: { ...process.env, ...env },
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const ask = <T>(command: object | undefined, reply: string): Promise<T> =>
    new Promise((resolve, reject) => {
      const onExit = (code: number | null): void => reject(new Error(`${file} exited (${code})`));
      child.once("exit", onExit);
      const onMessage = (m: { type: string }): void => {
        if (m.type !== reply) return;
        child.off("message", onMessage);
        child.off("exit", onExit);
        resolve(m as T);
      };
      child.on("message", onMessage);
      if (command !== undefined) child.send(command);
    });
  return { child, ask, ready: ask(undefined, "ready") };
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once("exit", resolve));
  child.send({ type: "exit" });
  const timer = setTimeout(() => child.pid !== undefined && process.kill(child.pid, "SIGKILL"), 5000);
  await exited;
  clearTimeout(timer);
}

/** Wall-clock ms with sub-ms precision: one timeline for the test and the app process (Date.now()). */
export const nowMs = (): number => performance.timeOrigin + performance.now();
export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

export interface Sample {
  /** Index into `Rig.apps`, or -1 for the floor handler. */
  app: number;
  startMs: number;
  ms: number;
  /** HTTP status, or 0 when no answer came (socket error or the client's 10 s timeout). */
  status: number;
}

export interface Rig {
  redis: RedisInstance;
  /** Sets the fault the proxy in front of the bridge applies from now on. */
  fault(fault: Fault): Promise<void>;
  proxyCounts(): Promise<FaultProxyCounts>;
  apps: AppInfo[];
  child: ChildProcess;
  samples: Sample[];
  /**
   * Closed-loop clients until `stop()`: `perApp` on each app, `floor` on the trivial handler, each
   * waiting `thinkMs` between requests (those on the trivial handler `floorThinkMs`, default the same).
   */
  load(perApp: number, floor: number, thinkMs: number, floorThinkMs?: number): { stop(): Promise<void> };
  ask<T>(command: Command, reply: string): Promise<T>;
  stats(peek?: boolean): Promise<StatsReply>;
  close(): Promise<void>;
}

export interface RigOptions {
  /** Only these integrations (`Adapter.name`s of test/hostile/support.ts); default all four. */
  adapters?: string[];
  /** Only these `onStoreError` policies; default all three. */
  policies?: string[];
  /** Run the clients in a process of their own (client-process.ts) instead of the test process. */
  clientProcess?: boolean;
  /** Clients start and think at random, as independent clients do (see `runClients`). */
  jitter?: boolean;
}

/** A closed-loop client target: `n` clients on `port`, their samples tagged `app`; `thinkMs` their own, if given. */
export interface Target {
  port: number;
  app: number;
  n: number;
  thinkMs?: number;
}

/**
 * Closed-loop clients until `stop()`: per target, `n` clients that each send a request, wait for
 * its answer, then `thinkMs`; every request's sample goes into `samples`. With `jitter`, each
 * client starts after a random part of `thinkMs` and waits a random 0.5 to 1.5 × `thinkMs`, as
 * independent clients do: without it, clients started together stay in step, and their requests
 * arrive (and time out) in bursts.
 */
export function runClients(targets: Target[], thinkMs: number, samples: Sample[], jitter = false): { stop(): Promise<void> } {
  let running = true;
  const loops: Promise<void>[] = [];
  for (const t of targets) {
    const ms = t.thinkMs ?? thinkMs;
    const think = (): number => (jitter ? ms * (0.5 + Math.random()) : ms);
    // Idle sockets are retired after 4 s, before the servers' 5 s keep-alive timeout closes them:
    // reusing a socket the server is closing at that moment resets it, a client-side loss that
    // would count as a request without an answer.
    const agent = new http.Agent({ keepAlive: true, maxSockets: t.n, timeout: 4_000 });
    for (let i = 0; i < t.n; i++) {
      loops.push((async () => {
        if (jitter) await sleep(Math.random() * ms);
        while (running) {
          samples.push(await request(agent, t.port, t.app));
          if (ms > 0) await sleep(think());
        }
      })());
    }
  }
  return {
    async stop() {
      running = false;
      await Promise.all(loops);
    },
  };
}

export async function startRig(redisArgs: string[], timeoutMs: number, prefix: string, options: RigOptions = {}): Promise<Rig> {
  const redis = await startRedis({ args: redisArgs });
  const upstash = forkTs(BRIDGE, { FG_REDIS_PORT: String(redis.port) });
  const { url, token } = await upstash.ready as { url: string; token: string };
  const apps = forkTs(APPS, {
    FG_TIMEOUT_MS: String(timeoutMs),
    FG_REDIS_PORT: String(redis.port),
    FG_UPSTASH_URL: url,
    FG_UPSTASH_TOKEN: token,
    FG_PREFIX: prefix,
    ...(options.adapters === undefined ? {} : { FG_ADAPTERS: options.adapters.join(",") }),
    ...(options.policies === undefined ? {} : { FG_POLICIES: options.policies.join(",") }),
  });
  const clients = options.clientProcess === true ? forkTs(CLIENTS, {}) : undefined;
  await clients?.ready;
  const child = apps.child;
  const ready = await apps.ready as { apps: AppInfo[]; floorPort: number };
  const samples: Sample[] = [];
  const ask = <T>(command: Command, reply: string): Promise<T> => apps.ask<T>(command, reply);

  const load = (perApp: number, floor: number, thinkMs: number, floorThinkMs = thinkMs): { stop(): Promise<void> } => {
    const targets = [
      ...ready.apps.map((a, i) => ({ port: a.port, app: i, n: perApp })),
      { port: ready.floorPort, app: -1, n: floor, thinkMs: floorThinkMs },
    ];
    if (clients === undefined) return runClients(targets, thinkMs, samples, options.jitter);
    clients.child.send({ type: "load", targets, thinkMs, jitter: options.jitter === true });
    return {
      async stop() {
        const reply = await clients.ask<{ samples: number[] }>({ type: "stop" }, "samples");
        const flat = reply.samples;
        for (let i = 0; i < flat.length; i += 4) {
          samples.push({ app: flat[i]!, startMs: flat[i + 1]!, ms: flat[i + 2]!, status: flat[i + 3]! });
        }
      },
    };
  };

  return {
    redis,
    fault: (fault) => upstash.ask({ type: "fault", fault }, "set").then(() => undefined),
    proxyCounts: () => upstash.ask<{ counts: FaultProxyCounts }>({ type: "counts" }, "counts").then((m) => m.counts),
    apps: ready.apps,
    child,
    samples,
    load,
    ask,
    stats: (peek = false) => ask<StatsReply>({ type: "stats", peek }, "stats"),
    async close() {
      if (clients !== undefined) await stopChild(clients.child);
      await stopChild(child);
      redis.kill("SIGCONT");
      await stopChild(upstash.child);
      await redis.stop();
    },
  };
}

function request(agent: http.Agent, port: number, app: number): Promise<Sample> {
  return new Promise((resolve) => {
    const startMs = nowMs();
    const done = (status: number): void => resolve({ app, startMs, ms: nowMs() - startMs, status });
    const req = http.get({ host: "127.0.0.1", port, path: "/", agent, timeout: 10_000 }, (res) => {
      res.resume();
      res.on("end", () => done(res.statusCode ?? 0));
      res.on("error", () => done(0));
    });
    req.on("timeout", () => req.destroy(new Error("timeout")));
    req.on("error", () => done(0));
  });
}

/** The q-quantile (0..1) of `values` (nearest rank); NaN for none. */
export function quantile(values: number[], q: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}

export const round = (ms: number): number => Math.round(ms * 10) / 10;
