/**
 * Exactness under concurrency on a real DynamoDB-compatible server: 4 OS processes × 250
 * concurrent `limit()` calls on one identifier with a limit of 100 admit exactly 100, for every
 * algorithm and for a set of several policies, in exact mode (and in leased mode, which may
 * admit fewer, never more).
 */
import { type ChildProcess, fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import { createTable, dynamoDBStore } from "@floodgate/dynamodb";
import { createRateLimiter, type PolicyKind } from "@floodgate/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ALGORITHMS } from "../../packages/core/src/algorithms/registry.ts";
import { hourly, KINDS, uniquePrefix } from "../stores/store-contract.ts";
import { type Dynalite, startDynalite } from "./dynalite.ts";
import type { RunMessage } from "./fixtures/concurrency-worker.ts";

const WORKER = fileURLToPath(new URL("./fixtures/concurrency-worker.ts", import.meta.url));
const PROCESSES = 4;
const CALLS = 250;
const LIMIT = 100;
const TABLE = "exactness";

type Reply = { type: "ready" } | { type: "done"; allowed: number; requests: number; conflicts: number } | { type: "error"; error: string };

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

let server: Dynalite;
let workers: ChildProcess[] = [];
beforeAll(async () => {
  server = await startDynalite();
  await createTable(server.client(), { table: TABLE });
  workers = Array.from({ length: PROCESSES }, () =>
    fork(WORKER, [], {
      execArgv: ["--import", "tsx"],
      env: { ...process.env, FG_ENDPOINT: server.endpoint, FG_TABLE: TABLE },
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    }));
  for (const r of await Promise.all(workers.map(nextMessage))) expect(r.type).toBe("ready");
}, 60_000);
afterAll(async () => {
  await Promise.all(workers.map((w) =>
    new Promise<void>((resolve) => {
      if (w.exitCode !== null || w.signalCode !== null) return resolve();
      w.once("exit", () => resolve());
      w.send({ type: "exit" });
    })
  ));
  await server?.stop();
});

async function runEverywhere(message: RunMessage): Promise<{ allowed: number; requests: number; conflicts: number }> {
  const replies = workers.map(nextMessage);
  for (const w of workers) w.send(message);
  const sum = { allowed: 0, requests: 0, conflicts: 0 };
  for (const r of await Promise.all(replies)) {
    if (r.type !== "done") throw new Error(`worker failed: ${JSON.stringify(r)}`);
    sum.allowed += r.allowed;
    sum.requests += r.requests;
    sum.conflicts += r.conflicts;
  }
  return sum;
}

describe("exactness under concurrency: DynamoDB (dynalite)", () => {
  it.each(KINDS)(`${PROCESSES} processes × ${CALLS} concurrent limit() with limit ${LIMIT} admit exactly ${LIMIT}: %s`, async (kind) => {
    const run = await runEverywhere({ type: "run", kind, prefix: uniquePrefix(), key: "hot", limit: LIMIT, calls: CALLS });
    console.log(`[dynamodb-exactness] ${JSON.stringify({ kind, ...run })}`);
    expect(run.allowed).toBe(LIMIT);
    expect(run.conflicts).toBeGreaterThan(0); // the processes did race
  }, 120_000);

  it(
    `several policies (two of one kind), ${PROCESSES} processes × ${CALLS} concurrent: exactly the tightest limit, every policy charged alike`,
    async () => {
      const kinds = [...KINDS, "sliding-log"] as PolicyKind[];
      const limits = [...kinds.slice(1).map((_, i) => 120 + 10 * i), LIMIT];
      const prefix = uniquePrefix();
      const run = await runEverywhere({ type: "run", kind: "fixed-window", kinds, limits, prefix, key: "hot", limit: LIMIT, calls: CALLS });
      expect(run.allowed).toBe(LIMIT);
      const peek = await createRateLimiter({
        policy: kinds.map((kind, i) => hourly(kind, limits[i]!, `p${i}`)),
        store: dynamoDBStore({ client: server.client(), table: TABLE }),
        prefix,
      }).peek("hot");
      expect(peek.policies.map((p) => p.limit - p.remaining)).toEqual(limits.map(() => LIMIT));
    },
    120_000,
  );

  it.each(KINDS.filter((k) => ALGORITHMS[k].traits.lease !== undefined))(
    `leased mode, ${PROCESSES} processes × ${CALLS}: never more than ${LIMIT}: %s`,
    async (kind) => {
      const run = await runEverywhere({
        type: "run",
        kind,
        prefix: uniquePrefix(),
        key: "hot",
        limit: LIMIT,
        calls: CALLS,
        mode: "leased",
      });
      console.log(`[dynamodb-exactness-leased] ${JSON.stringify({ kind, ...run })}`);
      expect(run.allowed).toBeLessThanOrEqual(LIMIT);
      expect(run.allowed).toBeGreaterThan(0);
    },
    120_000,
  );
});
