/**
 * Durable Objects in workerd for the suites of test/cloudflare: test/cloudflare/worker.ts
 * bundled from the packages' dist, run by miniflare as two Workers ("a" and "b", two isolates)
 * bound to one RateLimiterObject namespace with SQLite storage; and, in Node, a store whose every
 * call is one request to a Worker, which runs it on durableObjectStore there.
 */
import type { Miniflare } from "miniflare";
import { FloodgateError, type RateLimitStore } from "../../packages/core/src/index.ts";
import { bundle, requireBinary, requireBuilt, requirePackage } from "../runtimes/support.ts";

const CONDITIONS = ["workerd", "worker", "browser", "import", "default"];
export const COMPATIBILITY_DATE = "2025-09-01";

let code: Promise<string> | undefined;
/** The Worker's bundle (built once per test file). */
export function workerCode(): Promise<string> {
  code ??= (async () => {
    requireBinary("workerd", "miniflare");
    requireBuilt(["core", "cloudflare"]);
    const built = await bundle("test/cloudflare/worker.ts", { format: "esm", conditions: CONDITIONS, external: ["cloudflare:workers"] });
    if (!built.inputs.includes("packages/cloudflare/dist/index.js")) {
      throw new Error("the Worker was not bundled from packages/cloudflare/dist");
    }
    return built.code;
  })();
  return code;
}

/** Two Workers sharing one namespace of RateLimiterObject; state persisted under `persist` when given. */
export async function startWorkers(persist?: string): Promise<Miniflare> {
  const { Miniflare } = await requirePackage("miniflare", () => import("miniflare"));
  const script = await workerCode();
  const mf = new Miniflare({
    ...(process.env.FLOODGATE_WORKERD_LOG === "1"
      ? {
        handleRuntimeStdio: (o: NodeJS.ReadableStream, e: NodeJS.ReadableStream) => {
          o.pipe(process.stdout);
          e.pipe(process.stderr);
        },
      }
      : {}),
    ...(persist === undefined ? {} : { durableObjectsPersist: persist }),
    workers: [
      {
        name: "a",
        modules: true,
        script,
        compatibilityDate: COMPATIBILITY_DATE,
        durableObjects: { RATE_LIMITER: { className: "RateLimiterObject", useSQLite: true } },
      },
      {
        name: "b",
        modules: true,
        script,
        compatibilityDate: COMPATIBILITY_DATE,
        durableObjects: { RATE_LIMITER: { className: "RateLimiterObject", scriptName: "a", useSQLite: true } },
      },
    ],
  });
  await mf.ready;
  // The first call starts workerd's isolates and the object: seconds on a loaded machine, past a limiter's 1 s deadline.
  for (const worker of ["a", "b"] as const) await post(mf, worker, "/requests", {});
  await bridgedStore(mf, "a", "object").peek(WARM_UP, "warm-up", 0);
  return mf;
}

const WARM_UP = {
  prefix: "warm-up:",
  policies: [{ kind: "fixed-window", name: "w", limit: 1, windowMs: 1000, refillRate: 0, intervalMs: 0, blockMs: 0 }],
} as never;

/** POSTs `body` as JSON to `path` of Worker `worker` and answers the JSON reply (an error reply is thrown as a FloodgateError). */
export async function post(mf: Miniflare, worker: "a" | "b", path: string, body: unknown): Promise<any> {
  const fetcher = await mf.getWorker(worker);
  const response = await fetcher.fetch(`http://worker.test${path}`, { method: "POST", body: JSON.stringify(body) });
  const reply = await response.json() as { error?: { code: string; message: string } };
  if (reply.error !== undefined) {
    throw reply.error.code === "" ? new Error(reply.error.message) : new FloodgateError(reply.error.code as never, reply.error.message);
  }
  return reply;
}

/** The DO requests the stores of Worker `worker` have made. */
export async function requestsOf(mf: Miniflare, worker: "a" | "b"): Promise<number> {
  return (await post(mf, worker, "/requests", {})).requests;
}

/** A store in Node whose every call runs on durableObjectStore in Worker `worker` (signals stay here: the call is one request). */
export function bridgedStore(mf: Miniflare, worker: "a" | "b", clock: "object" | "caller", shards?: number): RateLimitStore {
  const call = async (method: string, ...args: unknown[]): Promise<any> =>
    (await post(mf, worker, "/store", { clock, shards, method, args })).result;
  return {
    name: "durable-object",
    ownsClock: clock === "object",
    consume: (set, key, cost, nowMs) => call("consume", set, key, cost, nowMs),
    peek: (set, key, nowMs) => call("peek", set, key, nowMs),
    refund: (set, key, cost, nowMs, marks) => call("refund", set, key, cost, nowMs, marks),
    reserve: (set, key, cost, nowMs, id, ttlMs) => call("reserve", set, key, cost, nowMs, id, ttlMs),
    settle: (set, key, id, actual, nowMs) => call("settle", set, key, id, actual, nowMs),
    lease: (set, key, request, nowMs) => call("lease", set, key, request, nowMs),
    reset: (set, key) => call("reset", set, key),
    penalty: (set, key, cost, nowMs) => call("penalty", set, key, cost, nowMs),
    block: (set, key, durationMs, nowMs) => call("block", set, key, durationMs, nowMs),
    unblock: (set, key) => call("unblock", set, key),
  };
}
