/**
 * The Worker bench/edge.ts runs on miniflare: one Hono app per variant, each rate-limiting every
 * request with a fixed window, over Durable Objects:
 * - "floodgate-exact": @floodgate/hono + durableObjectStore;
 * - "floodgate-exact-deny-cache": the same, the store behind withDenyCache;
 * - "floodgate-leased", "floodgate-leased-deny-cache": the two in leased mode;
 * - "hono-rate-limiter": hono-rate-limiter + @hono-rate-limiter/cloudflare's DurableObjectStore.
 * POST /run runs `decisions` requests through one app inside this Worker (at most `concurrency`
 * at once; request i carries key firstKey + i % keys) and answers what was admitted (in all, and
 * the keys admitted more than `limit` times), how long it took on the Worker's clock and the DO
 * requests made (every RPC on a stub of either namespace).
 */
import { Hono } from "hono";
import { rateLimiter } from "hono-rate-limiter";
import { DurableObjectStore } from "@hono-rate-limiter/cloudflare";
import { fixedWindow } from "@floodgate/core";
import { rateLimit } from "@floodgate/hono";
import { withDenyCache } from "@floodgate/core/store";
import { durableObjectStore, type RateLimiterNamespace } from "@floodgate/cloudflare";

export { RateLimiterObject } from "@floodgate/cloudflare";
export { DurableObjectRateLimiter } from "@hono-rate-limiter/cloudflare";

interface Env {
  FLOODGATE: RateLimiterNamespace;
  HRL: { idFromName(name: string): unknown; get(id: unknown): Record<string, (...args: unknown[]) => Promise<unknown>> };
}

let requests = 0;
/**
 * The namespace, counting the stubs it hands out: each store takes a stub for every call and makes
 * one RPC on it, so stubs handed out are DO requests (a proxy around a stub would break its RPC).
 */
function counted<N extends { get(id: any, ...rest: any[]): any }>(namespace: N): N {
  return {
    idFromName: (name: string) => (namespace as unknown as { idFromName(n: string): unknown }).idFromName(name),
    get: (...args: unknown[]) => {
      requests++;
      return (namespace.get as (...a: unknown[]) => unknown)(...args);
    },
  } as unknown as N;
}

/** The Worker's execution context, as Hono's `fetch` takes it. */
type ExecutionContext = Parameters<Hono["fetch"]>[2];

type Variant =
  | "floodgate-exact"
  | "floodgate-exact-deny-cache"
  | "floodgate-leased"
  | "floodgate-leased-deny-cache"
  | "hono-rate-limiter";

function app(variant: Variant, env: Env, limit: number, prefix: string, shards: number | undefined): Hono {
  const hono = new Hono();
  const key = (c: { req: { header(name: string): string | undefined } }): string => c.req.header("x-key") ?? "none";
  if (variant === "hono-rate-limiter") {
    hono.use(
      rateLimiter({
        windowMs: 86_400_000,
        limit,
        keyGenerator: key,
        store: new DurableObjectStore({ namespace: counted(env.HRL) as never, prefix }) as never,
      }),
    );
  } else {
    const store = durableObjectStore({ namespace: counted(env.FLOODGATE), ...(shards === undefined ? {} : { shards }) });
    hono.use(
      rateLimit({
        policy: fixedWindow({ limit, window: "24h" }),
        store: variant.endsWith("-deny-cache") ? withDenyCache(store) : store,
        key: (req) => req.header("x-key") ?? "none",
        prefix,
        // Slowness shows in decisions/s, never as failed-open decisions.
        timeoutMs: 60_000,
        circuitBreaker: false,
        ...(variant.startsWith("floodgate-leased") ? { mode: "leased" as const } : {}),
      }),
    );
  }
  hono.get("/", (c) => c.text("ok"));
  return hono;
}

export default {
  async fetch(request: Request, env: Env, ctx: ExecutionContext): Promise<Response> {
    const { variant, decisions, keys, firstKey = 0, concurrency, limit, prefix, shards } = await request.json() as {
      shards?: number;
      firstKey?: number;
      variant: Variant;
      decisions: number;
      keys: number;
      concurrency: number;
      limit: number;
      prefix: string;
    };
    const target = app(variant, env, limit, prefix, shards);
    const before = requests;
    let admitted = 0;
    let next = 0;
    const statuses: Record<number, number> = {};
    const admittedPerKey = new Map<number, number>();
    const started = Date.now();
    await Promise.all(Array.from({ length: concurrency }, async () => {
      while (next < decisions) {
        const i = next++;
        const key = firstKey + (i % keys);
        const response = await target.fetch(new Request("http://bench.test/", { headers: { "x-key": `k${key}` } }), env, ctx);
        if (response.status === 200) {
          admitted++;
          admittedPerKey.set(key, (admittedPerKey.get(key) ?? 0) + 1);
        } else statuses[response.status] = (statuses[response.status] ?? 0) + 1;
        await response.arrayBuffer();
      }
    }));
    const ms = Date.now() - started;
    let overAdmitted = 0;
    let mostPerKey = 0;
    for (const n of admittedPerKey.values()) {
      if (n > limit) overAdmitted++;
      mostPerKey = Math.max(mostPerKey, n);
    }
    return Response.json({ admitted, statuses, ms, requests: requests - before, overAdmitted, mostPerKey });
  },
};
