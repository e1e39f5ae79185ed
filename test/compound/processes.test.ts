/**
 * Compound decisions across OS processes: 4 processes × 250 concurrent calls over four
 * dimensions admit exactly the organisation's limit, on one Redis server (one script per
 * decision) and on a 3-master Redis Cluster whose keys lie in different slots (dimensions charged
 * one by one, given back on a refusal); every refused request's units are back afterwards.
 */
import { type ChildProcess, fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import { Cluster, Redis as IORedis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRateLimiter, fixedWindow, redisStore } from "../../packages/core/src/index.ts";
import { uniquePrefix } from "../stores/store-contract.ts";
import { type RedisCluster, type RedisInstance, startRedis, startRedisCluster } from "../support/redis-server.ts";
import type { WorkerMessage, WorkerReply } from "./fixtures/compound-worker.ts";

const WORKER = fileURLToPath(new URL("./fixtures/compound-worker.ts", import.meta.url));
const PROCESSES = 4;
const CALLS = 250;
const ORG_LIMIT = 300;
const GLOBAL_LIMIT = 5_000;

function nextMessage(child: ChildProcess): Promise<WorkerReply> {
  return new Promise((resolve, reject) => {
    const onExit = (code: number | null): void => reject(new Error(`worker ${child.pid} exited (${code}) early`));
    child.once("exit", onExit);
    child.once("message", (m: WorkerReply) => {
      child.off("exit", onExit);
      resolve(m);
    });
  });
}

const exited = (child: ChildProcess): Promise<void> =>
  new Promise((resolve) => (child.exitCode !== null || child.signalCode !== null ? resolve() : child.once("exit", () => resolve())));

/** Runs the workers once; answers what they admitted and bound, and the path they took. */
async function race(
  env: Record<string, string>,
  prefix: string,
): Promise<{ admitted: number; bound: Record<string, number>; paths: Set<string> }> {
  const workers = Array.from(
    { length: PROCESSES },
    () =>
      fork(WORKER, [], { execArgv: ["--import", "tsx"], env: { ...process.env, ...env }, stdio: ["ignore", "inherit", "inherit", "ipc"] }),
  );
  try {
    for (const r of await Promise.all(workers.map(nextMessage))) expect(r.type).toBe("ready");
    const replies = workers.map(nextMessage);
    workers.forEach((w, i) =>
      w.send(
        { type: "run", prefix, calls: CALLS, orgLimit: ORG_LIMIT, globalLimit: GLOBAL_LIMIT, me: String(i + 1) } satisfies WorkerMessage,
      )
    );
    let admitted = 0;
    const bound: Record<string, number> = {};
    const paths = new Set<string>();
    for (const r of await Promise.all(replies)) {
      if (r.type !== "done") throw new Error(`worker failed: ${JSON.stringify(r)}`);
      admitted += r.admitted;
      paths.add(r.path);
      for (const [d, n] of Object.entries(r.bound)) bound[d] = (bound[d] ?? 0) + n;
    }
    return { admitted, bound, paths };
  } finally {
    for (const w of workers) if (w.exitCode === null && w.signalCode === null) w.send({ type: "exit" } satisfies WorkerMessage);
    await Promise.all(workers.map(exited));
  }
}

/** Every dimension's remaining units after the race: each holds exactly the admitted requests. */
async function expectOnlyAdmitted(client: IORedis | Cluster, prefix: string, admitted: number): Promise<void> {
  const store = redisStore({ client, denyCache: false });
  const read = (name: string, limit: number, key: string) =>
    createRateLimiter({ policy: fixedWindow({ limit, window: "1h" }), store, prefix: `${prefix}${name}:` }).peek(key);
  expect((await read("org", ORG_LIMIT, "acme")).remaining).toBe(ORG_LIMIT - admitted);
  expect((await read("global", GLOBAL_LIMIT, "all")).remaining).toBe(GLOBAL_LIMIT - admitted);
  let users = 0;
  for (let i = 1; i <= PROCESSES; i++) {
    const user = await read("user", 1_000, String(i));
    const ip = await read("ip", 1_000, `10.0.0.${i}`);
    // A process's user and IP hold exactly what that process was admitted.
    expect(user.remaining).toBe(ip.remaining);
    users += 1_000 - user.remaining;
  }
  expect(users).toBe(admitted);
}

/** Clear of a window boundary: the race and the read-back fall in one hour. */
async function clearOfHour(): Promise<void> {
  const intoHour = Date.now() % 3_600_000;
  if (intoHour > 3_600_000 - 60_000) await new Promise((resolve) => setTimeout(resolve, 3_600_000 - intoHour + 100));
}

describe("compound decisions across 4 processes × 250 concurrent calls", () => {
  let redis: RedisInstance;
  let cluster: RedisCluster;
  let admin: IORedis;
  let clusterAdmin: Cluster;
  beforeAll(async () => {
    [redis, cluster] = await Promise.all([startRedis(), startRedisCluster()]);
    admin = new IORedis(redis.port, redis.host);
    clusterAdmin = new Cluster(cluster.startupNodes);
  }, 60_000);
  afterAll(async () => {
    admin?.disconnect();
    clusterAdmin?.disconnect();
    await Promise.all([redis?.stop(), cluster?.stop()]);
  });

  it("one Redis server: exactly the organisation's limit admitted, one script call per decision", async () => {
    await clearOfHour();
    const prefix = uniquePrefix();
    await admin.config("RESETSTAT");
    const { admitted, bound, paths } = await race({ FG_PORT: String(redis.port) }, prefix);
    expect([...paths]).toEqual(["store"]);
    // One script call per decision: one EVALSHA each (and an EVAL after a NOSCRIPT, while the
    // script is not yet loaded: every call sent before the first one loaded it, which may be all).
    const stats = await admin.info("commandstats");
    const calls = (name: string): number => Number(new RegExp(`cmdstat_${name}:calls=(\\d+)`).exec(stats)?.[1] ?? 0);
    expect(calls("evalsha")).toBe(PROCESSES * CALLS);
    expect(calls("eval")).toBeLessThanOrEqual(PROCESSES * CALLS);
    expect(admitted).toBe(ORG_LIMIT);
    expect(bound).toEqual({ org: PROCESSES * CALLS - ORG_LIMIT });
    await expectOnlyAdmitted(admin, prefix, admitted);
  }, 60_000);

  it("a 3-master Cluster, keys in different slots: exactly the limit, and every refusal given back", async () => {
    await clearOfHour();
    const prefix = uniquePrefix();
    const { admitted, bound, paths } = await race({ FG_CLUSTER: cluster.startupNodes.map((n) => n.port).join(",") }, prefix);
    // The store offers the step, and the Cluster refuses it for these keys: decided one by one.
    expect([...paths]).toEqual(["store"]);
    expect(admitted).toBe(ORG_LIMIT);
    expect(bound).toEqual({ org: PROCESSES * CALLS - ORG_LIMIT });
    await expectOnlyAdmitted(clusterAdmin, prefix, admitted);
  }, 60_000);
});
