/**
 * The Worker the Durable Objects suites run in workerd (bundled from the packages' dist):
 * RateLimiterObject bound as RATE_LIMITER, and
 * - POST /store: one call of durableObjectStore (method and arguments as JSON), so that the
 *   contract suite, run by vitest in Node, drives the store as it runs in a Worker;
 * - POST /limit: one decision of a limiter kept in this isolate (as an app keeps it), on one of
 *   the policy sets of the exactness tests (`latencyMs`: that long before each call reaches its object;
 *   `early`: the response goes before the decision is made, which workerd then cancels with the request);
 * - POST /peek, /flush: what a key has left; the unspent units of this isolate's leases given back;
 * - POST /requests: the DO requests the isolate's stores have made;
 * - POST /keys: how many keys the object of a single-shard store holds.
 */
import {
  concurrency,
  createRateLimiter,
  fixedWindow,
  type Policy,
  type RateLimiter,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from "@floodgate/core";
import { type DurableObjectStore, durableObjectStore, type RateLimiterNamespace, RateLimiterObject } from "@floodgate/cloudflare";

import { withDenyCache } from "@floodgate/core/store";

export { RateLimiterObject };

interface Env {
  RATE_LIMITER: RateLimiterNamespace;
}

const stores = new Map<string, DurableObjectStore>();
function storeFor(env: Env, clock: "object" | "caller", shards: number | undefined, latencyMs = 0): DurableObjectStore {
  const id = `${clock}/${shards ?? ""}/${latencyMs}`;
  let store = stores.get(id);
  if (store === undefined) {
    const namespace = latencyMs === 0 ? env.RATE_LIMITER : delayed(env.RATE_LIMITER, latencyMs);
    store = durableObjectStore({ namespace, clock, ...(shards === undefined ? {} : { shards }) });
    stores.set(id, store);
  }
  return store;
}

/**
 * The namespace with `ms` of network before each call reaches its object, as between a Worker and
 * an object in another place: the calling request waits on a timer of its own, and the thread
 * goes idle meanwhile (when workerd looks for requests that wait on nothing of their own).
 */
function delayed(namespace: RateLimiterNamespace, ms: number): RateLimiterNamespace {
  return {
    idFromName: (name) => namespace.idFromName(name),
    get: (id, options) => {
      const stub = namespace.get(id, options);
      return { decide: async (call) => (await new Promise((resolve) => setTimeout(resolve, ms)), stub.decide(call)) };
    },
  };
}

/** The exactness tests' policy sets: each kind at `limit` per hour, and one of every rate kind together. */
function policiesOf(set: string, limit: number): Policy[] {
  const window = "1h";
  const byKind: Record<string, () => Policy> = {
    "token-bucket": () => tokenBucket({ capacity: limit, refillRate: limit / 3600 }),
    "fixed-window": () => fixedWindow({ limit, window }),
    "sliding-window": () => slidingWindow({ limit, window }),
    "sliding-log": () => slidingLog({ limit, window }),
    concurrency: () => concurrency({ limit, timeout: window }),
  };
  if (set === "multi") {
    return [
      tokenBucket({ capacity: limit + 3, refillRate: (limit + 3) / 3600, name: "tb" }),
      fixedWindow({ limit, window, name: "fw" }),
      slidingWindow({ limit: limit + 1, window, name: "sw" }),
      slidingLog({ limit: limit + 2, window, name: "sl" }),
    ];
  }
  // The leasable kinds together (a sliding log is never leased: a set with one is decided exactly).
  if (set === "multi-leasable") {
    return [
      tokenBucket({ capacity: limit + 3, refillRate: (limit + 3) / 3600, name: "tb" }),
      fixedWindow({ limit, window, name: "fw" }),
      slidingWindow({ limit: limit + 1, window, name: "sw" }),
    ];
  }
  return [byKind[set]!()];
}

const limiters = new Map<string, RateLimiter>();

export default {
  async fetch(request: Request, env: Env, ctx: { waitUntil(promise: Promise<unknown>): void }): Promise<Response> {
    const url = new URL(request.url);
    try {
      if (url.pathname === "/store") {
        const { clock, shards, method, args } = await request.json() as {
          clock: "object" | "caller";
          shards?: number;
          method: string;
          args: unknown[];
        };
        const store = storeFor(env, clock, shards) as unknown as Record<string, (...a: unknown[]) => unknown>;
        const result = await store[method]!(...args);
        return Response.json({ result: result ?? null });
      }
      if (url.pathname === "/limit") {
        const { set, limit, prefix, mode, shards, key, denyCache, latencyMs, early } = await request.json() as {
          denyCache?: boolean;
          early?: boolean;
          latencyMs?: number;
          set: string;
          limit: number;
          prefix: string;
          mode: "exact" | "leased";
          shards?: number;
          key: string;
        };
        const id = `${prefix}/${mode}`;
        let limiter = limiters.get(id);
        if (limiter === undefined) {
          const store = storeFor(env, "object", shards, latencyMs);
          // The deny cache in front of the store: known denials answered in the isolate, no DO request.
          limiter = createRateLimiter({ policy: policiesOf(set, limit), store: denyCache ? withDenyCache(store) : store, prefix, mode });
          limiters.set(id, limiter);
        }
        if (set === "concurrency") {
          const r = await limiter.reserve(key);
          return Response.json({ allowed: r.decision.allowed });
        }
        if (early) {
          // Not waited for: the request ends with this response, and its store call with it.
          limiter.limit(key).then(undefined, () => undefined);
          return Response.json({ early: true });
        }
        const d = await limiter.limit(key);
        // A lease's refresh runs after the decision: the request must outlive it (as the adapters arrange).
        if (d.pending !== undefined) ctx.waitUntil(d.pending);
        return Response.json({ allowed: d.allowed, source: d.source });
      }
      if (url.pathname === "/peek") {
        const { set, limit, prefix, key } = await request.json() as { set: string; limit: number; prefix: string; key: string };
        const limiter = createRateLimiter({ policy: policiesOf(set, limit), store: storeFor(env, "object", undefined), prefix });
        const d = await limiter.peek(key);
        return Response.json({ remaining: d.remaining, policies: Object.fromEntries(d.policies.map((p) => [p.policy, p.remaining])) });
      }
      if (url.pathname === "/flush") {
        for (const limiter of limiters.values()) await limiter.flush();
        return Response.json({ ok: true });
      }
      if (url.pathname === "/keys") {
        // The object of shard 0 of 1 (every key of a single-shard store), asked directly.
        const stub = env.RATE_LIMITER.get(env.RATE_LIMITER.idFromName("floodgate-shard:0")) as unknown as { keyCount(): Promise<number> };
        return Response.json({ keys: await stub.keyCount() });
      }
      if (url.pathname === "/requests") {
        let requests = 0;
        for (const store of stores.values()) requests += store.requests;
        return Response.json({ requests });
      }
      return new Response("not found", { status: 404 });
    } catch (error) {
      const e = error as { code?: string; message?: string };
      return Response.json({ error: { code: e.code ?? "", message: e.message ?? String(error) } }, { status: 500 });
    }
  },
};
