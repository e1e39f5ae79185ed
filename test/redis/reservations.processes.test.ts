/**
 * Concurrency limits across OS processes, on one Redis server (TCP): 4 processes reserving at
 * once never hold more than `limit` units in flight, and a process holding units that is
 * SIGKILLed gets them back after the concurrency timeout, not before.
 */
import { type ChildProcess, fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import { Redis as IORedis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { concurrency, createRateLimiter, fixedWindow, redisStore } from "../../packages/core/src/index.ts";
import { uniquePrefix } from "../stores/store-contract.ts";
import { type RedisInstance, startRedis } from "../support/redis-server.ts";
import type { WorkerMessage } from "./fixtures/reservation-worker.ts";

const WORKER = fileURLToPath(new URL("./fixtures/reservation-worker.ts", import.meta.url));

type Reply =
  | { type: "ready" }
  | { type: "done"; highest: number; granted: number }
  | { type: "held"; allowed: number }
  | { type: "error"; error: string };

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

function exited(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once("exit", () => resolve());
  });
}

describe("concurrency limits across processes (TCP Redis)", () => {
  let redis: RedisInstance;
  let admin: IORedis;
  const workers: ChildProcess[] = [];

  async function start(count: number): Promise<ChildProcess[]> {
    const started = Array.from(
      { length: count },
      () =>
        fork(WORKER, [], {
          execArgv: ["--import", "tsx"],
          env: { ...process.env, FG_PORT: String(redis.port) },
          stdio: ["ignore", "inherit", "inherit", "ipc"],
        }),
    );
    workers.push(...started);
    for (const r of await Promise.all(started.map(nextMessage))) expect(r.type).toBe("ready");
    return started;
  }

  beforeAll(async () => {
    redis = await startRedis();
    admin = new IORedis(redis.port, redis.host);
  });
  afterAll(async () => {
    for (const w of workers) {
      if (w.exitCode === null && w.signalCode === null && w.pid !== undefined) {
        w.send({ type: "exit" } satisfies WorkerMessage);
        setTimeout(() => w.exitCode === null && w.signalCode === null && process.kill(w.pid!, "SIGKILL"), 5000).unref();
      }
    }
    await Promise.all(workers.map(exited));
    admin?.disconnect();
    await redis?.stop();
  });

  it("4 processes × 8 loops reserving and settling at once never hold more than `limit` units", async () => {
    const group = await start(4);
    const prefix = uniquePrefix();
    const message: WorkerMessage = { type: "run", prefix, key: "shared", limit: 3, loops: 8, rounds: 40, counter: `${prefix}inflight` };
    const replies = group.map(nextMessage);
    for (const w of group) w.send(message);
    let highest = 0;
    let granted = 0;
    for (const r of await Promise.all(replies)) {
      if (r.type !== "done") throw new Error(`worker failed: ${JSON.stringify(r)}`);
      highest = Math.max(highest, r.highest);
      granted += r.granted;
    }
    expect(highest).toBeLessThanOrEqual(3);
    expect(highest).toBeGreaterThanOrEqual(2); // the processes did contend
    expect(granted).toBeGreaterThan(12);
    // Every reservation was settled or cancelled: all units are back, no ledger key is left.
    const store = redisStore({ client: admin });
    const limiter = createRateLimiter({
      policy: [concurrency({ limit: 3, timeout: "1m" }), fixedWindow({ limit: 1_000_000, window: "1h" })],
      store,
      prefix,
    });
    expect((await limiter.peek("shared")).policies[0]!.remaining).toBe(3);
    expect(await admin.keys(`${prefix}{shared}:r:*`)).toEqual([]);
  });

  it("a process holding units is SIGKILLed: they come back after the timeout, not before", async () => {
    const [holder] = await start(1);
    const prefix = uniquePrefix();
    const timeoutMs = 2000;
    const limiter = createRateLimiter({
      policy: concurrency({ limit: 2, timeout: timeoutMs }),
      store: redisStore({ client: admin }),
      prefix,
    });
    const sentAt = Date.now();
    const reply = nextMessage(holder!);
    holder!.send({ type: "hold", prefix, key: "crash", limit: 2, timeoutMs, count: 2 } satisfies WorkerMessage);
    const held = await reply;
    expect(held).toEqual({ type: "held", allowed: 2 });
    const heldAt = Date.now();
    process.kill(holder!.pid!, "SIGKILL");
    await exited(holder!);
    // The units were reserved after sentAt: until sentAt + timeout they are held.
    const denied = await limiter.reserve("crash");
    expect(denied.decision.allowed).toBe(false);
    expect(denied.decision.retryAfterMs).toBeGreaterThan(0);
    expect(denied.decision.retryAfterMs).toBeLessThanOrEqual(timeoutMs);
    const beforeTimeout = sentAt + timeoutMs - 300 - Date.now();
    if (beforeTimeout > 0) await new Promise((resolve) => setTimeout(resolve, beforeTimeout));
    expect((await limiter.reserve("crash")).decision.allowed).toBe(false);
    // Both were reserved before heldAt: by heldAt + timeout both are back.
    await new Promise((resolve) => setTimeout(resolve, heldAt + timeoutMs + 100 - Date.now()));
    const back = await Promise.all([limiter.reserve("crash"), limiter.reserve("crash"), limiter.reserve("crash")]);
    expect(back.map((r) => r.decision.allowed).sort()).toEqual([false, true, true]);
  });
});
