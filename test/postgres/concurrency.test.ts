/**
 * Exactness across processes: 4 OS processes × 250 concurrent calls on one identifier with a limit
 * of 100 admit exactly 100, for every algorithm and for a set of several, over both clients. And
 * a PRIVATE server (started here; never the shared one) crashed mid-run (SIGQUIT: immediate
 * shutdown, recovery from the WAL) and started again: every admission answered before the crash
 * was committed (the state after the restart holds at least those charges), and the answers of
 * both halves together never exceed the limit.
 */
import { type ChildProcess, fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRateLimiter, type PolicyKind } from "../../packages/core/src/index.ts";
import { SQL_KINDS as POLICY_KINDS } from "../support/kinds.ts";
import { postgresStore } from "../../packages/postgres/src/index.ts";
import { clearOfHourBoundary, hourly, uniquePrefix } from "../stores/store-contract.ts";
import { postgresBinaries, postgresUnavailable, type PrivatePostgres, startPostgres } from "../support/postgres-server.ts";
import type { DoneMessage, RunMessage } from "./fixtures/worker.ts";
import { type ClientName, CLIENTS, type PostgresHarness, postgresHarness } from "./harness.ts";

const WORKER = fileURLToPath(new URL("./fixtures/worker.ts", import.meta.url));
const PROCESSES = 4;
const CALLS = 250;
const LIMIT = 100;
const unavailable = await postgresUnavailable();
if (unavailable !== undefined) console.log(unavailable);

type Reply = { type: "ready" } | DoneMessage;

function next(child: ChildProcess): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const onExit = (code: number | null): void => reject(new Error(`worker ${child.pid} exited (${code}) early`));
    child.once("exit", onExit);
    child.once("message", (m: Reply) => {
      child.off("exit", onExit);
      resolve(m);
    });
  });
}

async function startWorkers(client: ClientName, url: string): Promise<ChildProcess[]> {
  const workers = Array.from({ length: PROCESSES }, () =>
    fork(WORKER, [], {
      execArgv: ["--import", "tsx"],
      env: { ...process.env, FG_CLIENT: client === "pg" ? "pg" : "postgres", FG_URL: url },
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    }));
  for (const r of await Promise.all(workers.map(next))) expect(r.type).toBe("ready");
  return workers;
}

async function stopWorkers(workers: ChildProcess[]): Promise<void> {
  await Promise.all(workers.map((w) =>
    new Promise<void>((resolve) => {
      if (w.exitCode !== null || w.signalCode !== null) return resolve();
      w.once("exit", () => resolve());
      w.send({ type: "exit" });
    })
  ));
}

/** One run in every worker at once; the sum of their answers. */
async function run(workers: ChildProcess[], message: Omit<RunMessage, "type" | "calls">): Promise<{ allowed: number; failed: number }> {
  const replies = workers.map(next);
  for (const w of workers) w.send({ type: "run", calls: CALLS, ...message } satisfies RunMessage);
  const done = (await Promise.all(replies)) as DoneMessage[];
  return { allowed: done.reduce((s, d) => s + d.allowed, 0), failed: done.reduce((s, d) => s + d.failed, 0) };
}

describe.skipIf(unavailable !== undefined).each(CLIENTS)("cross-process exactness: postgresStore (%s)", (client) => {
  let h: PostgresHarness;
  let workers: ChildProcess[];
  beforeAll(async () => {
    h = await postgresHarness(client);
    workers = await startWorkers(client, h.db.url);
  });
  afterAll(async () => {
    if (workers) await stopWorkers(workers);
    await h?.close();
  });

  it.each(POLICY_KINDS)(`${PROCESSES} processes × ${CALLS} concurrent calls on one key admit exactly ${LIMIT}: %s`, async (kind) => {
    await clearOfHourBoundary(10_000);
    const { allowed, failed } = await run(workers, { prefix: uniquePrefix(), key: "hot", kinds: [kind], limits: [LIMIT] });
    expect(failed).toBe(0);
    expect(allowed).toBe(LIMIT);
  }, 60_000);

  it(`a set of every kind (limits ${LIMIT}, ${LIMIT + 10}, ...) admits exactly ${LIMIT}, each policy charged alike`, async () => {
    await clearOfHourBoundary(10_000);
    const kinds = POLICY_KINDS.filter((k) => k !== "concurrency");
    const prefix = uniquePrefix();
    const limits = kinds.map((_, i) => LIMIT + 10 * i);
    const { allowed, failed } = await run(workers, { prefix, key: "hot", kinds, limits });
    expect(failed).toBe(0);
    expect(allowed).toBe(LIMIT);
    const limiter = createRateLimiter({ policy: kinds.map((k, i) => hourly(k, limits[i]!, `p${i}`)), store: h.store("server"), prefix });
    expect((await limiter.peek("hot")).policies.map((p) => p.remaining)).toEqual(limits.map((l) => l - LIMIT));
  }, 60_000);
});

describe.skipIf(unavailable !== undefined || postgresBinaries() === undefined)("a crash and restart of a private server mid-run", () => {
  let server: PrivatePostgres;
  beforeAll(async () => {
    server = await startPostgres();
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
  });

  it.each(CLIENTS)("loses no committed charge and admits nothing over the limit (%s)", async (client) => {
    const admin = new pg.Client({ host: server.host, port: server.port, user: "postgres", database: "postgres" });
    await admin.connect();
    const database = `fg_restart_${client === "pg" ? "pg" : "js"}`;
    await admin.query(`CREATE DATABASE ${database}`);
    await admin.end();
    const url = `postgres://postgres@${server.host}:${server.port}/${database}`;
    const setup = new pg.Pool({ connectionString: url, max: 2 });
    setup.on("error", () => undefined);
    const store = postgresStore({ client: setup });
    await store.migrate();
    const workers = await startWorkers(client, url);
    try {
      await clearOfHourBoundary(20_000);
      const kinds: PolicyKind[] = ["fixed-window", "sliding-log"];
      const message = { prefix: uniquePrefix(), key: "hot", kinds, limits: [LIMIT, LIMIT] };
      // Every worker's pool connected first, so the crash falls among decisions, not connections.
      await run(workers, { ...message, prefix: uniquePrefix() });
      const first = run(workers, message);
      await new Promise((r) => setTimeout(r, 60));
      await server.crash();
      // Started again at once: calls in flight fail, or wait for a connection to the new server.
      await server.start();
      const before = await first;
      const limiter = createRateLimiter({ policy: kinds.map((k, i) => hourly(k, LIMIT, `p${i}`)), store, prefix: message.prefix });
      // The pool's connections died with the server: the first call after may fail, then it reconnects.
      let peek;
      for (let i = 0; i < 5 && peek === undefined; i++) peek = await limiter.peek("hot").catch(() => undefined);
      const charged = LIMIT - peek!.remaining;
      expect(charged).toBeGreaterThanOrEqual(before.allowed);
      const after = await run(workers, message);
      expect(after.failed).toBe(0);
      expect(after.allowed).toBe(LIMIT - charged);
      expect(before.allowed + after.allowed).toBeLessThanOrEqual(LIMIT);
      console.log(
        `restart (${client}): ${before.allowed} admitted and ${before.failed} failed in the run the crash hit, ${charged} charged after it, ${after.allowed} admitted after`,
      );
    } finally {
      await stopWorkers(workers);
      await setup.end().catch(() => undefined);
    }
  }, 120_000);
});
