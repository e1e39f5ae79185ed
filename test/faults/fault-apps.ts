/**
 * The app process of the store-fault suite (`node --import tsx test/faults/fault-apps.ts`, forked
 * with IPC): every integration (Express 5, Hono on @hono/node-server, Koa, withRateLimit behind
 * node:http) × every store (ioredis `redisStore`, `upstashStore` through the local bridge, here
 * behind the fault proxy) × every `onStoreError` policy, each app on its own port and prefix,
 * side by side in one process, plus a trivial handler with no rate limit (the latency floor).
 *
 * FG_ADAPTERS and FG_POLICIES (comma-separated names, optional) keep only those integrations and
 * policies: the timing suite runs one integration at a time.
 *
 * Each store is one `resilientStore` with the defaults but `timeoutMs` (FG_TIMEOUT_MS), shared
 * by the apps on it, as one process shares its store. The process counts every decision by
 * source, every 5xx, error, unhandled rejection and uncaught exception, samples the calls in
 * flight, and answers `stats` messages.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import dc from "node:diagnostics_channel";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Redis as UpstashRedis } from "@upstash/redis";
import { Redis as IORedis } from "ioredis";
import {
  createRateLimiter,
  type RateLimitStore,
  redisStore,
  type ResilientStore,
  resilientStore,
  upstashStore,
} from "../../packages/core/src/index.ts";
import { ADAPTERS } from "../hostile/support.ts";
import { hourly } from "../stores/store-contract.ts";
import { type AppCounts, type AppInfo, type Command, LIMIT, POLICIES, type StatsReply, STORES } from "./shared.ts";

const env = (name: string): string => {
  const value = process.env[name];
  if (value === undefined) throw new Error(`${name} is not set`);
  return value;
};

const unhandledRejections: string[] = [];
const uncaughtExceptions: string[] = [];
process.on("unhandledRejection", (reason) => unhandledRejections.push(String(reason)));
process.on("uncaughtException", (error) => uncaughtExceptions.push(String(error)));

// When each request reached the server (before any framework code), for the decision latency:
// the time from there to onDecision, on this process's clock, with no client or socket queue in it.
const arrival = new AsyncLocalStorage<number>();
dc.subscribe("http.server.request.start", () => arrival.enterWith(performance.now()));
/** [Date.now() at arrival, ms to the decision, 1 if the store decided], flat, per app. */
const decisionTimes: Record<string, number[]> = {};
/** The event loop's lag: [Date.now(), ms late] every 10 ms (what a timer firing now is late by). */
const lag: number[] = [];
{
  let expected = performance.now() + 10;
  setInterval(() => {
    const now = performance.now();
    lag.push(Date.now(), Math.max(0, now - expected));
    expected = now + 10;
  }, 10).unref();
}

const timeoutMs = Number(env("FG_TIMEOUT_MS"));
const redisPort = Number(env("FG_REDIS_PORT"));
const runPrefix = env("FG_PREFIX");
const only = <T>(all: readonly T[], name: (t: T) => string, variable: string): readonly T[] => {
  const names = process.env[variable]?.split(",");
  if (names === undefined) return all;
  const kept = all.filter((t) => names.includes(name(t)));
  if (kept.length !== names.length) throw new Error(`${variable}=${names.join(",")}: expected names among ${all.map(name).join(", ")}`);
  return kept;
};
const adapters = only(ADAPTERS, (a) => a.name, "FG_ADAPTERS");
const policies = only(POLICIES, (p) => p, "FG_POLICIES");
const logged: string[] = [];
const log = (m: string): void => void logged.push(`${Date.now()} ${m}`);
const logger = { warn: log, info: log };

// The clients as an app would make them: ioredis and @upstash/redis with their defaults.
const ioredis = new IORedis(redisPort, "127.0.0.1");
ioredis.on("error", () => undefined); // an app listens; ioredis would print every reconnect failure
const upstash = new UpstashRedis({ url: env("FG_UPSTASH_URL"), token: env("FG_UPSTASH_TOKEN"), enableTelemetry: false });
/** Per store, [Date.now() sent, Date.now() settled] of every consume sent to the store itself, flat. */
const consumeTimes: Record<string, number[]> = { ioredis: [], upstash: [] };
/**
 * The store as it is, with every consume it is sent timed: what says how many calls were in
 * flight when redis-server was killed (their replies lost, their outcome unknown to anyone).
 */
function timed(name: string, store: RateLimitStore): RateLimitStore {
  const times = consumeTimes[name]!;
  return new Proxy(store, {
    get(target, property) {
      const value = Reflect.get(target, property, target);
      if (property !== "consume") return typeof value === "function" ? value.bind(target) : value;
      return (...args: Parameters<RateLimitStore["consume"]>) => {
        const sentAt = Date.now();
        const settle = (): void => void times.push(sentAt, Date.now());
        const pending = target.consume(...args);
        if (pending instanceof Promise) pending.then(settle, settle);
        else settle();
        return pending;
      };
    },
  });
}
const stores: Record<(typeof STORES)[number], ResilientStore> = {
  ioredis: resilientStore(timed("ioredis", redisStore({ client: ioredis })), { timeoutMs, logger }),
  upstash: resilientStore(timed("upstash", upstashStore({ redis: upstash })), { timeoutMs, logger }),
};
const maxInFlight: Record<string, number> = { ioredis: 0, upstash: 0 };
setInterval(() => {
  for (const name of STORES) maxInFlight[name] = Math.max(maxInFlight[name]!, stores[name].stats().inFlight);
}, 2).unref();

// A separate connection for reading what the store holds.
const inspector = new IORedis(redisPort, "127.0.0.1");
inspector.on("error", () => undefined);

const counts: Record<string, AppCounts> = {};
const apps: AppInfo[] = [];
const servers: { close(): Promise<void> }[] = [];
const policy = hourly("fixed-window", LIMIT);

for (const adapter of adapters) {
  for (const store of STORES) {
    for (const onStoreError of policies) {
      const name = `${adapter.name} / ${store} / ${onStoreError}`;
      const prefix = `${runPrefix}${apps.length}:`;
      const c: AppCounts = {
        bySource: { store: 0, fallback: 0, allow: 0, deny: 0, cache: 0, denyList: 0, lease: 0 },
        storeAdmissions: 0,
        lastNotStoreAt: 0,
        errors: 0,
      };
      counts[name] = c;
      const times: number[] = decisionTimes[name] = [];
      const app = await adapter.start({
        policy,
        store: stores[store],
        prefix,
        onStoreError,
        key: () => "hot",
        warnings: false,
        onDecision: (info) => {
          c.bySource[info.source]++;
          const now = Date.now();
          const arrived = arrival.getStore();
          if (arrived !== undefined) {
            const ms = performance.now() - arrived;
            times.push(now - ms, ms, info.source === "store" ? 1 : 0);
          }
          if (info.source === "store") {
            if (info.allowed) c.storeAdmissions++;
          } else c.lastNotStoreAt = now;
        },
      });
      servers.push(app);
      Object.defineProperty(c, "errors", { get: () => app.errors.length, enumerable: true });
      apps.push({ name, integration: adapter.name, store, policy: onStoreError, port: app.port, prefix });
    }
  }
}

// The floor: the cheapest handler this process can serve, under the same load.
const floor: Server = createServer((_req, res) => {
  res.writeHead(200, { "content-type": "application/json" });
  res.end("{}");
}).listen(0, "127.0.0.1");
await new Promise<void>((resolve) => floor.once("listening", resolve));

async function held(app: AppInfo): Promise<number> {
  const limiter = createRateLimiter({ policy, store: redisStore({ client: inspector }), prefix: app.prefix, resilience: false });
  const peek = await limiter.peek("hot");
  return peek.limit - peek.remaining;
}

function stats(): Omit<StatsReply, "apps"> {
  const out: StatsReply["stores"] = {};
  for (const name of STORES) out[name] = { ...stores[name].stats(), maxInFlight: maxInFlight[name]! };
  return { type: "stats", stores: out, unhandledRejections, uncaughtExceptions, logged };
}

process.on("message", async (message: Command) => {
  if (message.type === "exit") {
    await Promise.all(servers.map((s) => s.close()));
    floor.closeAllConnections();
    floor.close();
    ioredis.disconnect();
    inspector.disconnect();
    process.disconnect();
    return;
  }
  if (message.type === "settle") {
    // Every abandoned call settled, and every late charge given back (or the time is up).
    const deadline = Date.now() + message.timeoutMs;
    const settled = (): boolean =>
      STORES.every((n) => {
        const s = stores[n].stats();
        return s.inFlight === 0 && s.lateRefunds + s.lateRefundsFailed === s.lateCharges;
      });
    while (!settled() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    process.send!({ type: "settled", settled: settled() });
    return;
  }
  const appCounts: Record<string, AppCounts> = {};
  for (const app of apps) {
    appCounts[app.name] = { ...counts[app.name]!, bySource: { ...counts[app.name]!.bySource } };
    if (message.peek === true) appCounts[app.name]!.held = await held(app);
  }
  process.send!({ ...stats(), apps: appCounts, ...(message.peek === true ? { decisionTimes, lag, consumeTimes } : {}) });
});

process.send!({ type: "ready", apps, floorPort: (floor.address() as AddressInfo).port });
