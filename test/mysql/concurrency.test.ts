/**
 * Exactness across processes: 4 OS processes × 250 concurrent `limit()` calls on one identifier
 * with a limit of 100 admit exactly 100, for every algorithm and for a set of several policies,
 * each process with its own mysql2 pool on the test database. Then, on a private server started
 * here (never the shared one), the server SIGKILLed mid-run and restarted: no committed charge
 * is lost (InnoDB recovers it) and nothing is admitted over the limit.
 */
import { type ChildProcess, fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import mysql from "mysql2/promise";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRateLimiter, type PolicyKind } from "../../packages/core/src/index.ts";
import { mysqlStore } from "../../packages/mysql/src/index.ts";
import { clearOfHourBoundary, hourly, uniquePrefix } from "../stores/store-contract.ts";
import { SQL_RATE_KINDS as KINDS } from "../support/kinds.ts";
import type { DoneMessage, RunMessage } from "../redis/fixtures/concurrency-worker.ts";
import {
  MYSQL_MISSING,
  mysqlBinaries,
  mysqlDatabase,
  type MysqlTarget,
  type PrivateMysql,
  startPrivateMysql,
} from "../support/mysql-server.ts";

const WORKER = fileURLToPath(new URL("./fixtures/worker.ts", import.meta.url));
const PROCESSES = 4;
const CALLS = 250;
const LIMIT = 100;

type Reply = { type: "ready" } | (DoneMessage & { type: "done" }) | { type: "error"; error: string };

function nextMessage(child: ChildProcess): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const onExit = (code: number | null): void => reject(new Error(`worker ${child.pid} exited (${code}) early`));
    child.once("exit", onExit);
    child.once("message", (m: Reply) => {
      child.off("exit", onExit);
      resolve(m);
    });
  });
}

async function startWorkers(target: MysqlTarget, database: string): Promise<ChildProcess[]> {
  const env = {
    ...process.env,
    FG_HOST: target.host,
    FG_PORT: String(target.port),
    FG_USER: target.user,
    FG_PASSWORD: target.password,
    FG_DATABASE: database,
  };
  const workers = Array.from(
    { length: PROCESSES },
    () => fork(WORKER, [], { execArgv: ["--import", "tsx"], env, stdio: ["ignore", "inherit", "inherit", "ipc"] }),
  );
  for (const r of await Promise.all(workers.map(nextMessage))) expect(r.type).toBe("ready");
  return workers;
}

async function stopWorkers(workers: ChildProcess[]): Promise<void> {
  await Promise.all(workers.map((w) =>
    new Promise<void>((resolve) => {
      if (w.exitCode !== null || w.signalCode !== null) return resolve();
      w.once("exit", () => resolve());
      w.send({ type: "exit" });
      setTimeout(() => w.exitCode === null && w.kill("SIGKILL"), 5000).unref();
    })
  ));
}

async function runAll(workers: ChildProcess[], message: RunMessage): Promise<Required<Omit<DoneMessage, "type">>> {
  const replies = workers.map(nextMessage);
  for (const w of workers) w.send(message);
  const sum = { allowed: 0, failed: 0, lateCharges: 0, lateRefunds: 0, lateRefundsFailed: 0 };
  for (const r of await Promise.all(replies)) {
    if (r.type !== "done") throw new Error(`worker failed: ${JSON.stringify(r)}`);
    for (const k of Object.keys(sum) as (keyof typeof sum)[]) sum[k] += r[k] ?? 0;
  }
  return sum;
}

const db = await mysqlDatabase();

describe.skipIf(db === undefined)("exactness under concurrency: mysql", () => {
  let workers: ChildProcess[] = [];
  let pool: mysql.Pool;
  beforeAll(async () => {
    pool = db!.pool();
    await mysqlStore({ client: pool, database: db!.database }).migrate();
    workers = await startWorkers(db!.target, db!.database);
  }, 60_000);
  afterAll(async () => {
    await stopWorkers(workers);
    await db?.drop();
  });

  it.each(KINDS)(`${PROCESSES} processes × ${CALLS} concurrent limit() with limit ${LIMIT} admit exactly ${LIMIT}: %s`, async (kind) => {
    const prefix = uniquePrefix();
    const { allowed } = await runAll(workers, { type: "run", kind, prefix, key: "hot", limit: LIMIT, calls: CALLS });
    expect(allowed).toBe(LIMIT);
    const peek = await createRateLimiter({
      policy: hourly(kind, LIMIT),
      store: mysqlStore({ client: pool, database: db!.database }),
      prefix,
    })
      .peek("hot");
    expect(peek.remaining).toBe(0);
  }, 120_000);

  it(
    `several policies (two of one kind), ${PROCESSES} processes × ${CALLS} concurrent: exactly the tightest limit, every policy charged alike`,
    async () => {
      const kinds = [...KINDS, "sliding-log"] as PolicyKind[];
      const limits = [130, 120, 140, 150, LIMIT];
      const prefix = uniquePrefix();
      const { allowed } = await runAll(workers, {
        type: "run",
        kind: "fixed-window",
        kinds,
        limits,
        prefix,
        key: "hot",
        limit: LIMIT,
        calls: CALLS,
      });
      expect(allowed).toBe(LIMIT);
      const peek = await createRateLimiter({
        policy: kinds.map((kind, i) => hourly(kind, limits[i]!, `p${i}`)),
        store: mysqlStore({ client: pool, database: db!.database }),
        prefix,
      }).peek("hot");
      expect(peek.policies.map((p) => p.limit - p.remaining)).toEqual(limits.map(() => LIMIT));
    },
    120_000,
  );
});

const binaries = mysqlBinaries() !== undefined;
if (!binaries) console.log(`${MYSQL_MISSING} (the restart test needs a private server's binaries)`);

describe.skipIf(!binaries)("exactness with a private server SIGKILLed and restarted mid-run (InnoDB, durable commits)", () => {
  let server: PrivateMysql;
  let workers: ChildProcess[] = [];
  let pool: mysql.Pool;
  const database = "floodgate_restart";
  beforeAll(async () => {
    server = await startPrivateMysql();
    const admin = await mysql.createConnection(server.target);
    await admin.query(`CREATE DATABASE ${database}`);
    await admin.end();
    pool = mysql.createPool({ ...server.target, database, connectionLimit: 4 });
    pool.on("connection", (c) => c.on("error", () => undefined));
    await mysqlStore({ client: pool, database }).migrate();
    workers = await startWorkers(server.target, database);
  }, 120_000);
  afterAll(async () => {
    await stopWorkers(workers);
    await pool?.end().catch(() => undefined);
    await server?.stop();
  }, 60_000);

  it.each(KINDS)(
    `${PROCESSES} processes: 10 calls each, then ${CALLS - 10} concurrent each with the server killed mid-run and restarted, then ${
      CALLS - 10
    } again: %s`,
    async (kind) => {
      await clearOfHourBoundary(30_000);
      const base: RunMessage = { type: "run", kind, prefix: uniquePrefix(), key: "hot", limit: LIMIT, calls: 10, resilient: true };
      // Before and after the crash, deadlines are generous: a loaded machine is no outage.
      const first = await runAll(workers, { ...base, timeoutMs: 10_000 });
      expect(first.allowed).toBe(PROCESSES * 10);
      const second = runAll(workers, { ...base, calls: CALLS - 10 });
      await new Promise((resolve) => setTimeout(resolve, 30));
      await server.kill("SIGKILL");
      await new Promise((resolve) => setTimeout(resolve, 300));
      await server.restart();
      const during = await second;
      const third = await runAll(workers, { ...base, calls: CALLS - 10, timeoutMs: 10_000, awaitStore: true });
      const total = first.allowed + during.allowed + third.allowed;
      const peek = await createRateLimiter({
        policy: hourly(kind, LIMIT),
        store: mysqlStore({ client: pool, database }),
        prefix: base.prefix,
      })
        .peek("hot");
      const charged = LIMIT - peek.remaining;
      console.log(
        `[mysql-restart] ${
          JSON.stringify({
            kind,
            admitted: total,
            before: first.allowed,
            during: during.allowed,
            duringFailed: during.failed,
            after: third.allowed,
            charged,
          })
        }`,
      );
      expect(during.lateRefunds + during.lateRefundsFailed).toBe(during.lateCharges);
      expect(third.failed, "calls that failed after the restart").toBe(0);
      // Nothing over the limit, and every admission the store answered is still charged after
      // the restart: the key is full, so the charges recovered are at least those admitted.
      expect(total).toBeLessThanOrEqual(LIMIT);
      expect(charged).toBe(LIMIT);
      expect(charged).toBeGreaterThanOrEqual(total);
    },
    180_000,
  );
});
