/**
 * PostgreSQL for tests. `testDatabase()` uses the server on 127.0.0.1:5432 when it answers (trust
 * auth, user postgres), in a database created under a unique name and dropped by `drop()`; when
 * none answers, a private instance (`startPostgres()`), installing the server with apt-get first
 * when the binaries are missing and this runs as root; otherwise it answers why the suites skip.
 *
 * A private instance runs as a non-root user (postgres, else nobody) in its own temporary
 * directory, on a free loopback port and a socket in that directory, fsync on (a crash keeps
 * what was committed); it is stopped by its pid and killed if the test process goes away.
 * Never touches a database or a server it did not create.
 */
import { type ChildProcess, execFileSync, spawn, spawnSync } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import pg from "pg";

export interface PostgresServer {
  readonly host: string;
  readonly port: number;
  /** Whether this process started it (only such a server may be restarted). */
  readonly private: boolean;
}

export interface TestDatabase {
  readonly server: PostgresServer;
  /** The database's name, unique to this run. */
  readonly database: string;
  /** Connection settings for pg / postgres.js. */
  readonly connection: { host: string; port: number; user: string; database: string };
  /** `postgres://postgres@host:port/database` */
  readonly url: string;
  /** Drops the database (terminating its connections). */
  drop(): Promise<void>;
}

export interface PrivatePostgres extends PostgresServer {
  readonly pid: number;
  readonly dir: string;
  /** Stops the server abruptly (SIGQUIT: immediate shutdown, recovery from the WAL at the next start). */
  crash(): Promise<void>;
  /** Starts it again on the same port and data directory. */
  start(): Promise<void>;
  /** Stops it (fast shutdown) and removes its directory. */
  stop(): Promise<void>;
}

const SHARED = { host: "127.0.0.1", port: 5432 };
const live = new Set<ChildProcess>();
let hooked = false;

function hook(): void {
  if (hooked) return;
  hooked = true;
  const killAll = (): void => {
    for (const child of live) {
      if (child.pid !== undefined) {
        try {
          process.kill(child.pid, "SIGQUIT");
        } catch {
          // already gone
        }
      }
    }
  };
  process.on("exit", killAll);
}

/** Whether a PostgreSQL server answers there (as user postgres, trust auth). */
export async function answers(host: string, port: number): Promise<boolean> {
  const client = new pg.Client({ host, port, user: "postgres", database: "postgres", connectionTimeoutMillis: 2000 });
  try {
    await client.connect();
    await client.query("SELECT 1");
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** The directory of initdb and postgres, if installed. */
export function postgresBinaries(): string | undefined {
  try {
    const dir = execFileSync("pg_config", ["--bindir"], { encoding: "utf8" }).trim();
    if (existsSync(path.join(dir, "initdb"))) return dir;
  } catch {
    // no pg_config on PATH
  }
  const base = "/usr/lib/postgresql";
  if (!existsSync(base)) return undefined;
  const versions = readdirSync(base).filter((v) => existsSync(path.join(base, v, "bin", "initdb"))).sort((a, b) => Number(b) - Number(a));
  return versions[0] === undefined ? undefined : path.join(base, versions[0], "bin");
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as net.AddressInfo).port;
      server.close(() => resolve(port));
    });
  });
}

/** The user a private server runs as: root may not run PostgreSQL. */
function serverUser(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  for (const name of ["postgres", "nobody"]) {
    const id = spawnSync("id", ["-u", name], { encoding: "utf8" });
    const gid = spawnSync("id", ["-g", name], { encoding: "utf8" });
    if (id.status === 0 && gid.status === 0) return { uid: Number(id.stdout.trim()), gid: Number(gid.stdout.trim()) };
  }
  throw new Error("running as root, but neither user postgres nor nobody exists to run a private PostgreSQL server");
}

/** Starts a private PostgreSQL server (initdb in a temporary directory); throws when the binaries are missing. */
export async function startPostgres(): Promise<PrivatePostgres> {
  const bin = postgresBinaries();
  if (bin === undefined) throw new Error("PostgreSQL server binaries not found (Debian package postgresql)");
  hook();
  const dir = mkdtempSync(path.join(os.tmpdir(), "floodgate-pg-"));
  const user = serverUser();
  if (user !== undefined) chownSync(dir, user.uid, user.gid);
  const data = path.join(dir, "data");
  const asUser = user === undefined ? {} : { uid: user.uid, gid: user.gid };
  const init = spawnSync(path.join(bin, "initdb"), ["-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-instructions"], {
    ...asUser,
    encoding: "utf8",
  });
  if (init.status !== 0) throw new Error(`initdb failed: ${init.stderr}`);
  const port = await freePort();
  let child: ChildProcess | undefined;
  let output = "";
  const start = async (): Promise<void> => {
    child = spawn(
      path.join(bin, "postgres"),
      ["-D", data, "-p", String(port), "-k", dir, "-c", "listen_addresses=127.0.0.1", "-c", "fsync=on", "-c", "max_connections=200"],
      { ...asUser, stdio: ["ignore", "pipe", "pipe"] },
    );
    live.add(child);
    child.stdout?.on("data", (b: Buffer) => (output += b.toString()));
    child.stderr?.on("data", (b: Buffer) => (output += b.toString()));
    const exited = child;
    child.once("exit", () => live.delete(exited));
    for (let i = 0; i < 300; i++) {
      if (await answers("127.0.0.1", port)) return;
      if (child.exitCode !== null) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`private PostgreSQL did not start on port ${port}:\n${output}`);
  };
  const signal = async (sig: NodeJS.Signals): Promise<void> => {
    const c = child;
    if (c === undefined || c.exitCode !== null || c.signalCode !== null || c.pid === undefined) return;
    const gone = new Promise<void>((resolve) => c.once("exit", () => resolve()));
    process.kill(c.pid, sig);
    await gone;
  };
  await start();
  return {
    host: "127.0.0.1",
    port,
    private: true,
    dir,
    get pid() {
      return child?.pid ?? -1;
    },
    crash: () => signal("SIGQUIT"),
    start,
    async stop() {
      await signal("SIGINT");
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

let privateServer: Promise<PrivatePostgres> | undefined;

/** Installs the server with apt-get when root and apt-get is there; answers whether the binaries are there now. */
function install(): boolean {
  if (postgresBinaries() !== undefined) return true;
  if (process.getuid?.() !== 0 || spawnSync("which", ["apt-get"]).status !== 0) return false;
  spawnSync("apt-get", ["install", "-y", "--no-install-recommends", "postgresql"], {
    stdio: "ignore",
    env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" },
  });
  return postgresBinaries() !== undefined;
}

/** Why the PostgreSQL suites skip, or undefined when a server is there (or can be started). */
export async function postgresUnavailable(): Promise<string | undefined> {
  if (await answers(SHARED.host, SHARED.port)) return undefined;
  if (install()) return undefined;
  return "PostgreSQL suites skipped: no server answers on 127.0.0.1:5432 and no PostgreSQL binaries are installed (install them with `apt-get install -y postgresql`, or start a server there with trust auth for user postgres).";
}

/** Marks this run's database names (`FLOODGATE_TEST_DB_TAG`, letters, digits and _), to tell runs sharing a server apart. */
const TAG = /^[a-z0-9_]+$/.test(process.env.FLOODGATE_TEST_DB_TAG ?? "") ? `${process.env.FLOODGATE_TEST_DB_TAG}_` : "";
let counter = 0;

/** A database of its own for a test file, on the shared server or a private one (see the top of this file). */
export async function testDatabase(): Promise<TestDatabase> {
  let server: PostgresServer;
  if (await answers(SHARED.host, SHARED.port)) server = { ...SHARED, private: false };
  else {
    if (!install()) throw new Error((await postgresUnavailable()) ?? "no PostgreSQL");
    server = await (privateServer ??= startPostgres());
  }
  const database = `floodgate_test_${TAG}${process.pid}_${Date.now().toString(36)}_${++counter}`;
  const admin = new pg.Client({ host: server.host, port: server.port, user: "postgres", database: "postgres" });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${database}`);
  } finally {
    await admin.end();
  }
  const connection = { host: server.host, port: server.port, user: "postgres", database };
  return {
    server,
    database,
    connection,
    url: `postgres://postgres@${server.host}:${server.port}/${database}`,
    async drop() {
      const c = new pg.Client({ host: server.host, port: server.port, user: "postgres", database: "postgres" });
      await c.connect();
      try {
        await c.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
}
