import {
  type CallSignal,
  FloodgateError,
  type LeaseRequest,
  type Policy,
  type PolicySet,
  type RateLimitStore,
  type ReservationArgs,
  type StoreResult,
} from "@floodgate/core/store";
import type { ObjectCall, ObjectOperation } from "./protocol.ts";
import { objectName } from "./routing.ts";

/** The RPC side of a {@link RateLimiterObject} stub, as a binding's `get()` returns it. */
export interface RateLimiterStub {
  /** See {@link RateLimiterObject.decide}. */
  decide(call: ObjectCall): Promise<readonly number[]>;
}

/**
 * A Durable Object namespace binding of {@link RateLimiterObject} (`env.RATE_LIMITER`): the
 * methods the store calls. Cloudflare's `DurableObjectNamespace<RateLimiterObject>` is one.
 */
export interface RateLimiterNamespace {
  /** The id of the object named `name`. */
  idFromName(name: string): unknown;
  /** A stub of the object `id`; `locationHint` places an object created by this call. */
  get(id: any, options?: { locationHint?: any }): RateLimiterStub;
}

/** Options of {@link durableObjectStore}. */
export interface DurableObjectStoreOptions {
  /** The binding of {@link RateLimiterObject} (`env.RATE_LIMITER`). */
  namespace: RateLimiterNamespace;
  /**
   * Spread keys over this many objects (a whole number from 1 to 1,000,000) instead of one object
   * per key (the default). A key's calls always go to one object, so a hot key never gets more
   * than one object's throughput either way; see docs/cloudflare-and-deno.md.
   */
  shards?: number;
  /**
   * Whose clock decides: `"object"` (default), the Durable Object's, one clock for every Worker
   * calling it; `"caller"`, the time the limiter passes (its `clock` option), for tests.
   */
  clock?: "object" | "caller";
  /** Where to create objects that do not exist yet (Cloudflare's `locationHint`, e.g. `"weur"`); default: near the first caller. */
  locationHint?: string;
}

/** A {@link durableObjectStore}: a store with a count of the calls it made to objects. */
export interface DurableObjectStore extends RateLimitStore {
  /** RPC calls made to objects so far: Durable Object requests, which Cloudflare bills. */
  readonly requests: number;
}

const OPTIONS = new Set(["namespace", "shards", "clock", "locationHint"]);

function invalid(
  option: string,
  received: string,
  expected: string,
): FloodgateError {
  return new FloodgateError(
    "INVALID_OPTION",
    `durableObjectStore(): invalid option \`${option}\`: received ${received}; expected ${expected}.`,
  );
}

function checked(
  options: DurableObjectStoreOptions,
): DurableObjectStoreOptions {
  if (typeof options !== "object" || options === null) {
    throw invalid("options", String(options), "an object with `namespace`");
  }
  for (const name of Object.keys(options)) {
    if (!OPTIONS.has(name)) {
      throw new FloodgateError(
        "INVALID_OPTION",
        `durableObjectStore(): unknown option \`${name}\`; accepted options: ${[...OPTIONS].join(", ")}.`,
      );
    }
  }
  const ns = options.namespace as Partial<RateLimiterNamespace> | undefined;
  if (typeof ns?.idFromName !== "function" || typeof ns.get !== "function") {
    throw invalid(
      "namespace",
      ns === undefined ? "undefined" : "an object without idFromName() and get()",
      "the Durable Object namespace binding of RateLimiterObject (env.RATE_LIMITER)",
    );
  }
  const { shards, clock, locationHint } = options;
  if (
    shards !== undefined &&
    !(Number.isInteger(shards) && shards >= 1 && shards <= 1_000_000)
  ) {
    throw invalid(
      "shards",
      String(shards),
      "a whole number from 1 to 1000000, or nothing for one object per key",
    );
  }
  if (clock !== undefined && clock !== "object" && clock !== "caller") {
    throw invalid(
      "clock",
      JSON.stringify(clock),
      '"object" (default) or "caller"',
    );
  }
  if (locationHint !== undefined && typeof locationHint !== "string") {
    throw invalid(
      "locationHint",
      typeof locationHint,
      'a location hint such as "weur"',
    );
  }
  return options;
}

/** Policies as plain fields, once per policy set: what structured clone carries anyway, without the symbol. */
const plainSets = new WeakMap<PolicySet, readonly Policy[]>();
function plainPolicies(set: PolicySet): readonly Policy[] {
  let plain = plainSets.get(set);
  if (plain === undefined) {
    // A calendar window's calendar travels too (a plain object); the other kinds have none.
    plain = set.policies.map((
      { kind, name, limit, windowMs, refillRate, intervalMs, blockMs, calendar },
    ) => (calendar === undefined
      ? { kind, name, limit, windowMs, refillRate, intervalMs, blockMs }
      : { kind, name, limit, windowMs, refillRate, intervalMs, blockMs, calendar: { ...calendar } })
    );
    plainSets.set(set, plain);
  }
  return plain;
}

/**
 * A store whose state lives in Durable Objects: each key is routed to an object of
 * {@link RateLimiterObject} (one per key, or one of `shards`), which decides every policy of the
 * set in one step on its own clock and storage. Every operation of the contract: several
 * policies atomically, refunds into their charge, reservations, leases (`mode: "leased"`),
 * blocks, penalties, reset.
 *
 * @example
 * // createRateLimiter and slidingWindow come from "@floodgate/core".
 * import { durableObjectStore } from "@floodgate/cloudflare";
 * export { RateLimiterObject } from "@floodgate/cloudflare";
 *
 * export default {
 *   async fetch(request: Request, env: { RATE_LIMITER: DurableObjectNamespace }) {
 *     const limiter = createRateLimiter({ policy: slidingWindow({ limit: 100, window: "1m" }), store: durableObjectStore({ namespace: env.RATE_LIMITER }) });
 *     const decision = await limiter.limit(request.headers.get("cf-connecting-ip") ?? "unknown");
 *     return decision.allowed ? new Response("ok") : new Response("Too Many Requests", { status: 429 });
 *   },
 * };
 */
export function durableObjectStore(
  options: DurableObjectStoreOptions,
): DurableObjectStore {
  const { namespace, shards, locationHint } = checked(options);
  const callerClock = options.clock === "caller";
  const getOptions = locationHint === undefined ? undefined : { locationHint };
  let requests = 0;

  async function call(
    op: ObjectOperation,
    set: PolicySet,
    key: string,
    cost: number,
    nowMs: number,
    extra?: { marks?: readonly number[]; reservation?: ReservationArgs; lease?: LeaseRequest },
    signal?: CallSignal,
  ): Promise<StoreResult> {
    if (signal?.aborted) {
      throw new FloodgateError(
        "STORE_TIMEOUT",
        "Durable Object store: the call was abandoned before it was sent.",
      );
    }
    const message: ObjectCall = {
      op,
      prefix: set.prefix,
      policies: plainPolicies(set),
      key,
      cost,
      ...(callerClock ? { nowMs } : {}),
      ...extra,
    };
    const stub = namespace.get(
      namespace.idFromName(objectName(set.prefix, key, shards)),
      getOptions,
    );
    requests++;
    try {
      return await stub.decide(message);
    } catch (error) {
      if (error instanceof FloodgateError) throw error;
      // Overloaded objects and broken connections say so (`overloaded`, `retryable`); either way no state was read.
      const e = error as { message?: string; overloaded?: boolean };
      throw new FloodgateError(
        e.overloaded ? "STORE_UNAVAILABLE" : "STORE_ERROR",
        `Durable Object store: ${op} failed: ${e.message ?? String(error)}`,
        {
          cause: error,
        },
      );
    }
  }

  return {
    name: "durable-object",
    ownsClock: !callerClock,
    get requests() {
      return requests;
    },
    consume: (set, key, cost, nowMs, signal) => call("consume", set, key, cost, nowMs, undefined, signal),
    peek: (set, key, nowMs, signal) => call("peek", set, key, 1, nowMs, undefined, signal),
    refund: async (set, key, cost, nowMs, marks) => {
      await call(
        "refund",
        set,
        key,
        cost,
        nowMs,
        marks === undefined ? undefined : { marks },
      );
    },
    reserve: (set, key, cost, nowMs, id, ttlMs, signal) =>
      call(
        "reserve",
        set,
        key,
        cost,
        nowMs,
        { reservation: { id, ttlMs } },
        signal,
      ),
    // Leased mode: returns, the request and a new lease in one call to the key's object.
    lease: (set, key, request, nowMs, signal) => call("lease", set, key, 0, nowMs, { lease: request }, signal),
    settle: async (set, key, id, actual, nowMs) =>
      (await call("settle", set, key, 0, nowMs, {
        reservation: { id, actual },
      }))[0] === 1,
    reset: async (set, key) => {
      await call("reset", set, key, 0, 0);
    },
    penalty: async (set, key, cost, nowMs) => {
      await call("penalty", set, key, cost, nowMs);
    },
    // A block's duration travels as the cost, as evaluateState takes it.
    block: async (set, key, durationMs, nowMs) => {
      await call("block", set, key, durationMs, nowMs);
    },
    unblock: async (set, key) => {
      await call("unblock", set, key, 0, Date.now());
    },
  };
}
