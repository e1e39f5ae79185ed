/**
 * Private `redis-server` processes for tests: one per call, on a free loopback port or a unix
 * socket, in its own temporary directory, persisting nothing. Every process started here is
 * stopped by its own pid, and killed when the test process goes away (PR_SET_PDEATHSIG through
 * `setpriv` where it exists, plus exit/signal hooks), so a crashed run leaves no orphan server.
 *
 * Never touches the machine's own Redis on 6379: ports come from the kernel (bind to port 0).
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { accessSync, constants as fsConstants, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { connectResp, RespError, type RespTarget } from "../../packages/upstash-local/src/resp.ts";

export const REDIS_SERVER_MISSING =
  "redis-server is required for these tests but was not found on PATH; install it with `apt-get install -y redis-server`";
export const REDIS_CLI_MISSING =
  "redis-cli is required for Redis Cluster tests but was not found on PATH; install it with `apt-get install -y redis-server` (it brings redis-tools)";

export interface StartRedisOptions {
  /** A TCP port on 127.0.0.1, or "auto" (default) for a free one picked by the kernel. */
  port?: number | "auto";
  /** Listen on a unix socket in the private directory instead of TCP (`--port 0`). */
  unixSocket?: boolean;
  /** Extra `redis-server` arguments, appended after the defaults (so they win). */
  args?: string[];
  /** How long to wait for PING to answer. Default 10 000 ms. */
  startTimeoutMs?: number;
}

export interface RedisInstance {
  /** 127.0.0.1 (also in unix socket mode, where `port` is 0). */
  readonly host: string;
  readonly port: number;
  /** The unix socket path, in unix socket mode. */
  readonly socket?: string;
  /** `redis://127.0.0.1:<port>`, or `unix://<socket path>` in unix socket mode. */
  readonly url: string;
  /** Pid of the current process (a restart changes it). */
  readonly pid: number;
  /** The private working directory (logfile `redis.log` lives there). */
  readonly dir: string;
  /** False once the process has exited (stopped, killed or crashed). */
  readonly running: boolean;
  /** Where a RESP client should connect. */
  readonly target: RespTarget;
  /** Resolves when the current process exits. */
  exited(): Promise<void>;
  /** Stops the server (SIGTERM, then SIGKILL after 5 s) and removes its directory. */
  stop(): Promise<void>;
  /** Sends a signal to the current process, by pid. Default SIGKILL. Does not wait. */
  kill(signal?: NodeJS.Signals): void;
  /** Stops the process if it runs, then starts a new one on the same port/socket and directory. Data is lost. */
  restart(): Promise<void>;
  /** The server's log so far (for failure messages). */
  log(): string;
}

// Kept on globalThis so a module graph re-evaluated in the same process (vitest isolation)
// shares one registry and installs the process hooks once.
interface Registry {
  live: Map<number, ChildProcess>;
  liveDirs: Set<string>;
  hooksInstalled: boolean;
}
const REGISTRY_KEY: unique symbol = Symbol.for("floodgate.test.redis-server.registry");
const globalStore = globalThis as typeof globalThis & { [REGISTRY_KEY]?: Registry };
const registry = (globalStore[REGISTRY_KEY] ??= { live: new Map(), liveDirs: new Set(), hooksInstalled: false });
const { live, liveDirs } = registry;

function installCleanupHooks(usesDeathSignal: boolean): void {
  if (registry.hooksInstalled) return;
  registry.hooksInstalled = true;
  const killAll = (): void => {
    for (const [pid] of live) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // already gone
      }
    }
    live.clear();
    for (const dir of liveDirs) rmSync(dir, { recursive: true, force: true });
    liveDirs.clear();
  };
  process.once("exit", killAll);
  // Without PR_SET_PDEATHSIG, a signal that ends this process would orphan the servers: kill
  // them, then let the signal do what it would have done if nobody else listens for it.
  if (!usesDeathSignal) {
    for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
      const onSignal = (): void => {
        killAll();
        if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
      };
      process.once(signal, onSignal);
    }
  }
}

function findOnPath(command: string): string | undefined {
  for (const dir of (process.env["PATH"] ?? "").split(path.delimiter)) {
    if (dir === "") continue;
    const candidate = path.join(dir, command);
    try {
      accessSync(candidate, fsConstants.X_OK);
      return candidate;
    } catch {
      // keep looking
    }
  }
  return undefined;
}

/** Resolves the redis-server binary or throws the install hint. */
export function requireRedisServer(): string {
  const binary = findOnPath("redis-server");
  if (binary === undefined) throw new Error(REDIS_SERVER_MISSING);
  return binary;
}

/** A TCP port on 127.0.0.1 that was free a moment ago (the kernel picked it). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.once("error", reject);
    server.listen({ host: "127.0.0.1", port: 0, exclusive: true }, () => {
      const address = server.address();
      const port = typeof address === "object" && address !== null ? address.port : 0;
      server.close(() => (port > 0 ? resolve(port) : reject(new Error("no port assigned"))));
    });
  });
}

class AddressInUseError extends Error {}

async function waitForPing(target: RespTarget, child: ChildProcess, timeoutMs: number, logFile: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) {
      const log = `${readLog(logFile)}${stderrOf.get(child)?.text ?? ""}`;
      if (/address already in use/i.test(log)) throw new AddressInUseError(log);
      throw new Error(`redis-server exited (${child.exitCode ?? child.signalCode}) before answering PING:\n${log}`);
    }
    try {
      const client = await connectResp(target, { connectTimeoutMs: 1000 });
      try {
        // Something else may own the port and never answer: bound every attempt.
        let timer: NodeJS.Timeout | undefined;
        const reply = await Promise.race([
          client.send(["PING"]),
          new Promise<never>((_, reject) => {
            timer = setTimeout(() => reject(new Error("PING got no answer within 1000 ms")), 1000);
          }),
        ]).finally(() => clearTimeout(timer));
        if (Buffer.isBuffer(reply) && reply.toString() === "PONG") return;
        lastError = reply instanceof RespError ? reply : new Error(`unexpected PING reply ${String(reply)}`);
      } finally {
        client.destroy();
      }
    } catch (error) {
      lastError = error;
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`redis-server did not answer PING within ${timeoutMs} ms (${String(lastError)}):\n${readLog(logFile)}`);
}

function readLog(file: string): string {
  try {
    return readFileSync(file, "utf8");
  } catch {
    return "";
  }
}

const DIR_PREFIX = "floodgate-redis-";
const OWNER_FILE = "owner.pid";

/**
 * Removes directories left by test processes that were killed before they could clean up
 * (SIGKILL leaves no chance). Only directories whose recorded owner process is gone.
 */
function sweepStaleDirs(): void {
  let entries: string[];
  try {
    entries = readdirSync(os.tmpdir()).filter((name) => name.startsWith(DIR_PREFIX));
  } catch {
    return;
  }
  for (const name of entries) {
    const dir = path.join(os.tmpdir(), name);
    let owner: number;
    try {
      owner = Number(readFileSync(path.join(dir, OWNER_FILE), "utf8"));
    } catch {
      continue; // being created right now, or not ours to judge
    }
    if (!Number.isInteger(owner) || owner <= 0 || isProcessAlive(owner)) continue;
    rmSync(dir, { recursive: true, force: true });
  }
}

function isProcessAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

let deathSignalWrapperCache: { path: string | undefined } | undefined;
/** util-linux `setpriv`, which sets PR_SET_PDEATHSIG before exec'ing redis-server (Linux only). */
function deathSignalWrapper(): string | undefined {
  deathSignalWrapperCache ??= { path: process.platform === "linux" ? findOnPath("setpriv") : undefined };
  return deathSignalWrapperCache.path;
}

/** stderr of each spawned process (config errors land there before the logfile is open). */
const stderrOf = new WeakMap<ChildProcess, { text: string }>();

function spawnServer(binary: string, args: string[]): ChildProcess {
  const wrapper = deathSignalWrapper();
  const stdio = ["ignore", "ignore", "pipe"] as const;
  const child = wrapper
    ? spawn(wrapper, ["--pdeathsig", "SIGKILL", "--", binary, ...args], { stdio: [...stdio] })
    : spawn(binary, args, { stdio: [...stdio] });
  const stderr = { text: "" };
  stderrOf.set(child, stderr);
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr.text = (stderr.text + chunk.toString()).slice(-16_384);
  });
  (child.stderr as (NodeJS.ReadableStream & { unref?: () => void }) | null)?.unref?.();
  if (child.pid === undefined) throw new Error(`could not spawn ${binary}`);
  const pid = child.pid;
  live.set(pid, child);
  child.once("exit", () => live.delete(pid));
  // A spawn failure (ENOENT...) arrives as an event; the PING wait reports it.
  child.on("error", () => undefined);
  return child;
}

/**
 * Starts a private redis-server and waits until it answers PING.
 *
 * @example
 * const redis = await startRedis();
 * afterAll(() => redis.stop());
 * const client = new IORedis(redis.port, redis.host);
 */
export async function startRedis(options: StartRedisOptions = {}): Promise<RedisInstance> {
  const binary = requireRedisServer();
  installCleanupHooks(deathSignalWrapper() !== undefined);
  sweepStaleDirs();
  const dir = mkdtempSync(path.join(os.tmpdir(), DIR_PREFIX));
  writeFileSync(path.join(dir, OWNER_FILE), String(process.pid));
  liveDirs.add(dir);
  const logFile = path.join(dir, "redis.log");
  const socketPath = options.unixSocket ? path.join(dir, "redis.sock") : undefined;
  const fixedPort = typeof options.port === "number" ? options.port : undefined;
  const startTimeoutMs = options.startTimeoutMs ?? 10_000;

  let port = 0;
  let child: ChildProcess | undefined;

  const launch = async (): Promise<void> => {
    const listen = socketPath
      ? ["--port", "0", "--unixsocket", socketPath, "--unixsocketperm", "700"]
      : ["--port", String(port), "--bind", "127.0.0.1"];
    const args = [
      ...listen,
      "--dir",
      dir,
      "--save",
      "",
      "--appendonly",
      "no",
      "--daemonize",
      "no",
      "--logfile",
      logFile,
      "--protected-mode",
      "yes",
      ...(options.args ?? []),
    ];
    child = spawnServer(binary, args);
    const target: RespTarget = socketPath ? { path: socketPath } : { host: "127.0.0.1", port };
    try {
      await waitForPing(target, child, startTimeoutMs, logFile);
    } catch (error) {
      await stopChild(child);
      throw error;
    }
  };

  const maxAttempts = socketPath || fixedPort !== undefined ? 1 : 5;
  for (let attempt = 1;; attempt++) {
    port = socketPath ? 0 : (fixedPort ?? (await freePort()));
    try {
      await launch();
      break;
    } catch (error) {
      if (error instanceof AddressInUseError && attempt < maxAttempts) continue;
      liveDirs.delete(dir);
      rmSync(dir, { recursive: true, force: true });
      if (error instanceof AddressInUseError) {
        throw new Error(`redis-server could not listen on 127.0.0.1:${port}: address already in use`);
      }
      throw error;
    }
  }

  const current = (): ChildProcess => {
    if (child === undefined) throw new Error("redis-server was never started");
    return child;
  };
  let removed = false;

  const instance: RedisInstance = {
    host: "127.0.0.1",
    port,
    ...(socketPath ? { socket: socketPath } : {}),
    url: socketPath ? `unix://${socketPath}` : `redis://127.0.0.1:${port}`,
    get pid() {
      return current().pid as number;
    },
    dir,
    get running() {
      const c = current();
      return c.exitCode === null && c.signalCode === null;
    },
    target: socketPath ? { path: socketPath } : { host: "127.0.0.1", port },
    exited: () => exitOf(current()),
    async stop() {
      await stopChild(current());
      if (!removed) {
        removed = true;
        liveDirs.delete(dir);
        rmSync(dir, { recursive: true, force: true });
      }
    },
    kill(signal: NodeJS.Signals = "SIGKILL") {
      const c = current();
      if (c.exitCode === null && c.signalCode === null && c.pid !== undefined) process.kill(c.pid, signal);
    },
    async restart() {
      if (removed) throw new Error("cannot restart a stopped redis-server: its directory is gone");
      await stopChild(current());
      await launch();
    },
    log: () => readLog(logFile),
  };
  return instance;
}

function exitOf(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once("exit", () => resolve()));
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return;
  const exited = exitOf(child);
  // A stopped (SIGSTOP) process ignores SIGTERM until continued.
  try {
    process.kill(child.pid, "SIGCONT");
    process.kill(child.pid, "SIGTERM");
  } catch {
    // exited meanwhile
  }
  const timer = setTimeout(() => {
    try {
      if (child.pid !== undefined && child.exitCode === null && child.signalCode === null) process.kill(child.pid, "SIGKILL");
    } catch {
      // exited meanwhile
    }
  }, 5000);
  await exited;
  clearTimeout(timer);
}

export interface RedisClusterNode {
  host: string;
  port: number;
}

export interface RedisCluster {
  /** The master processes, in creation order. */
  nodes: RedisInstance[];
  /** `{ host, port }` of every node: what `new IORedis.Cluster(startupNodes)` wants. */
  startupNodes: RedisClusterNode[];
  /** Stops every node. */
  stop(): Promise<void>;
}

export interface StartRedisClusterOptions {
  /** Number of masters (no replicas). Default 3, the minimum `redis-cli --cluster create` accepts. */
  masters?: number;
  /** Extra arguments for every node. */
  args?: string[];
  /** How long to wait for `cluster_state:ok` on every node. Default 30 000 ms. */
  readyTimeoutMs?: number;
}

/**
 * Starts a Redis Cluster of `masters` loopback nodes (no replicas) and waits until every node
 * reports `cluster_state:ok` with all 16384 slots assigned.
 *
 * @example
 * const cluster = await startRedisCluster();
 * afterAll(() => cluster.stop());
 * const client = new IORedis.Cluster(cluster.startupNodes);
 */
export async function startRedisCluster(options: StartRedisClusterOptions = {}): Promise<RedisCluster> {
  const masters = options.masters ?? 3;
  if (masters < 3) throw new Error("a Redis Cluster needs at least 3 masters");
  const cli = findOnPath("redis-cli");
  if (cli === undefined) throw new Error(REDIS_CLI_MISSING);
  const nodes: RedisInstance[] = [];
  const stop = async (): Promise<void> => {
    await Promise.all(nodes.map((node) => node.stop()));
  };
  try {
    for (let i = 0; i < masters; i++) {
      nodes.push(await startClusterNode(options.args ?? []));
    }
    await new Promise<void>((resolve, reject) => {
      execFile(
        cli,
        ["--cluster", "create", ...nodes.map((n) => `${n.host}:${n.port}`), "--cluster-replicas", "0", "--cluster-yes"],
        { timeout: 30_000 },
        (error, stdout, stderr) =>
          error ? reject(new Error(`redis-cli --cluster create failed: ${error.message}\n${stdout}\n${stderr}`)) : resolve(),
      );
    });
    await waitForClusterOk(nodes, masters, options.readyTimeoutMs ?? 30_000);
  } catch (error) {
    await stop();
    throw error;
  }
  return { nodes, startupNodes: nodes.map((n) => ({ host: n.host, port: n.port })), stop };
}

async function startClusterNode(extraArgs: string[]): Promise<RedisInstance> {
  // The bus port defaults to port + 10000, which may be taken or past 65535: pick it too.
  for (let attempt = 1;; attempt++) {
    const busPort = await freePort();
    try {
      return await startRedis({
        args: [
          "--cluster-enabled",
          "yes",
          "--cluster-config-file",
          "nodes.conf",
          "--cluster-port",
          String(busPort),
          "--cluster-node-timeout",
          "5000",
          ...extraArgs,
        ],
      });
    } catch (error) {
      if (attempt < 5 && /address already in use/i.test(String(error))) continue;
      throw error;
    }
  }
}

async function waitForClusterOk(nodes: RedisInstance[], masters: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = "";
  while (Date.now() < deadline) {
    const infos = await Promise.all(
      nodes.map(async (node) => {
        const client = await connectResp(node.target);
        try {
          const reply = await client.send(["CLUSTER", "INFO"]);
          return Buffer.isBuffer(reply) ? reply.toString() : String(reply);
        } finally {
          client.destroy();
        }
      }),
    );
    const ready = infos.every(
      (info) =>
        info.includes("cluster_state:ok") &&
        info.includes("cluster_slots_assigned:16384") &&
        info.includes(`cluster_known_nodes:${masters}`),
    );
    if (ready) return;
    last = infos.join("\n---\n");
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`Redis Cluster did not reach cluster_state:ok within ${timeoutMs} ms:\n${last}`);
}
