/**
 * A MySQL/MariaDB server for tests. `mysqlDatabase()` uses the server that answers on
 * 127.0.0.1:3306 as root without a password (or `FLOODGATE_MYSQL_URL`), in a database created
 * here under a unique name and dropped by `drop()`; it never touches another database. When none
 * answers, it starts a private server if the binaries are installed (`startPrivateMysql`), after
 * installing them with apt-get when it runs as root; otherwise it answers undefined and the suite
 * skips with one line saying what to install.
 *
 * A private server runs as a non-root user (`mysql`, else `nobody`) on a free loopback port and a
 * socket in its own temporary directory, and is stopped by its pid (also when the test process
 * exits). The restart test uses one on purpose: the shared service is never restarted.
 */
import { type ChildProcess, execFileSync, spawn, spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import mysql from "mysql2/promise";
import { freePort } from "./redis-server.ts";

/** Where to connect: mysql2's options without a database. */
export interface MysqlTarget {
  readonly host: string;
  readonly port: number;
  readonly socketPath?: string;
  readonly user: string;
  readonly password: string;
}

/** A database of the test's own. */
export interface MysqlTestDatabase {
  readonly target: MysqlTarget;
  readonly database: string;
  /** A new pool on the database (closed by `drop()`). */
  pool(options?: mysql.PoolOptions): mysql.Pool;
  /** Drops the database, closes the pools, stops a private server started for it. */
  drop(): Promise<void>;
}

export const MYSQL_MISSING =
  "[mysql] skipped: no MySQL/MariaDB server answers on 127.0.0.1:3306 (root, no password) and none is installed; install one with `apt-get install -y mariadb-server`, or set FLOODGATE_MYSQL_URL=mysql://user:password@host:port";

function sharedTarget(): MysqlTarget {
  const url = process.env.FLOODGATE_MYSQL_URL;
  if (url === undefined || url === "") return { host: "127.0.0.1", port: 3306, user: "root", password: "" };
  const u = new URL(url);
  return { host: u.hostname, port: Number(u.port || 3306), user: decodeURIComponent(u.username), password: decodeURIComponent(u.password) };
}

async function answers(target: MysqlTarget): Promise<boolean> {
  try {
    const connection = await mysql.createConnection({ ...target, connectTimeout: 2000 });
    await connection.query("SELECT 1");
    await connection.end();
    return true;
  } catch {
    return false;
  }
}

const BINARIES = [["mariadbd", "mariadb-install-db"], ["mysqld", "mysql_install_db"]] as const;

function which(name: string): string | undefined {
  for (const dir of [...(process.env.PATH ?? "").split(path.delimiter), "/usr/sbin", "/usr/bin"]) {
    if (dir !== "" && existsSync(path.join(dir, name))) return path.join(dir, name);
  }
  return undefined;
}

/** The server and installer binaries, if installed. */
export function mysqlBinaries(): { server: string; install: string } | undefined {
  for (const [server, install] of BINARIES) {
    const s = which(server);
    const i = which(install);
    if (s !== undefined && i !== undefined) return { server: s, install: i };
  }
  return undefined;
}

/** Installs MariaDB's binaries with apt-get when root on a system with apt-get (not started as a service here). */
function installBinaries(): boolean {
  if (process.getuid?.() !== 0 || which("apt-get") === undefined) return false;
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
  spawnSync("apt-get", ["update"], { stdio: "ignore", env });
  return spawnSync("apt-get", ["install", "-y", "--no-install-recommends", "mariadb-server"], { stdio: "ignore", env }).status === 0;
}

/** A private server: its own datadir, port and socket; stopped and restarted by pid. */
export interface PrivateMysql {
  readonly target: MysqlTarget;
  readonly pid: number;
  /** Sends `signal` (default SIGKILL) to the server's pid and waits for it to exit. */
  kill(signal?: NodeJS.Signals): Promise<void>;
  /** Starts the server again on the same datadir, port and socket (InnoDB recovers what was committed). */
  restart(): Promise<void>;
  /** Stops the server and removes its directory. */
  stop(): Promise<void>;
}

const running = new Set<ChildProcess>();
process.once("exit", () => {
  for (const child of running) child.kill("SIGKILL");
});

/** Starts a private server (throws when the binaries are missing). */
export async function startPrivateMysql(): Promise<PrivateMysql> {
  const bin = mysqlBinaries();
  if (bin === undefined) throw new Error(MYSQL_MISSING);
  const dir = mkdtempSync(path.join(os.tmpdir(), "floodgate-mysql-"));
  chmodSync(dir, 0o755);
  const datadir = path.join(dir, "data");
  const socketPath = path.join(dir, "mysqld.sock");
  const user = process.getuid?.() === 0 ? (spawnSync("id", ["mysql"]).status === 0 ? "mysql" : "nobody") : undefined;
  const userArgs = user === undefined ? [] : [`--user=${user}`];
  execFileSync(bin.install, ["--no-defaults", `--datadir=${datadir}`, "--auth-root-authentication-method=normal", ...userArgs], {
    stdio: "ignore",
  });
  if (user !== undefined) execFileSync("chown", ["-R", `${user}:`, dir]);
  const port = await freePort();
  let child: ChildProcess | undefined;
  const start = async (): Promise<void> => {
    child = spawn(bin.server, [
      "--no-defaults",
      `--datadir=${datadir}`,
      `--port=${port}`,
      "--bind-address=127.0.0.1",
      `--socket=${socketPath}`,
      `--pid-file=${path.join(dir, "mysqld.pid")}`,
      `--log-error=${path.join(dir, "error.log")}`,
      "--skip-name-resolve",
      "--innodb-buffer-pool-size=64M",
      ...userArgs,
    ], { stdio: "ignore", detached: false });
    running.add(child);
    const started = Date.now();
    while (!(await answers({ host: "127.0.0.1", port, user: "root", password: "" }))) {
      if (child.exitCode !== null || Date.now() - started > 60_000) {
        const log = existsSync(path.join(dir, "error.log")) ? readFileSync(path.join(dir, "error.log"), "utf8").slice(-2000) : "";
        throw new Error(`private MariaDB/MySQL did not start on port ${port}:\n${log}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  };
  const kill = async (signal: NodeJS.Signals = "SIGKILL"): Promise<void> => {
    const c = child;
    if (c === undefined || c.exitCode !== null || c.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => c.once("exit", () => resolve()));
    process.kill(c.pid!, signal);
    await exited;
    running.delete(c);
  };
  await start();
  return {
    target: { host: "127.0.0.1", port, user: "root", password: "" },
    get pid() {
      return child!.pid!;
    },
    kill,
    restart: start,
    async stop() {
      await kill("SIGTERM");
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Marks this run's database names (`FLOODGATE_TEST_DB_TAG`, letters, digits and _), to tell runs sharing a server apart. */
const TAG = /^[a-z0-9_]+$/.test(process.env.FLOODGATE_TEST_DB_TAG ?? "") ? `${process.env.FLOODGATE_TEST_DB_TAG}_` : "";
let counter = 0;

/** A database of the test's own on a server that answers (see the module's doc); undefined: skip. */
export async function mysqlDatabase(): Promise<MysqlTestDatabase | undefined> {
  let target = sharedTarget();
  let server: PrivateMysql | undefined;
  if (!(await answers(target))) {
    if (mysqlBinaries() === undefined && !installBinaries()) {
      console.log(MYSQL_MISSING);
      return undefined;
    }
    server = await startPrivateMysql();
    target = server.target;
  }
  const database = `fg_test_${TAG}${process.pid}_${Date.now().toString(36)}_${++counter}`;
  const admin = await mysql.createConnection(target);
  await admin.query(`CREATE DATABASE \`${database}\``);
  await admin.end();
  const pools: mysql.Pool[] = [];
  return {
    target,
    database,
    pool(options = {}) {
      const pool = mysql.createPool({ ...target, database, connectionLimit: 16, ...options });
      pools.push(pool);
      return pool;
    },
    async drop() {
      await Promise.all(pools.splice(0).map((p) => p.end().catch(() => undefined)));
      const admin = await mysql.createConnection(target);
      await admin.query(`DROP DATABASE IF EXISTS \`${database}\``);
      await admin.end();
      await server?.stop();
    },
  };
}
