// The browser test's page script: bundled by esbuild from core's dist into one classic script
// (no imports), loaded by a plain HTML page in headless Chromium. It runs the scenarios when the
// test asks (`floodgateBrowser.run(name)`) and returns plain figures: the assertions are made in
// Node, on what comes back through `page.evaluate`.
//
// The global-scope guard is imported first, so it records any timer, fetch or random-value call
// made while core's module is evaluated; `__MISBEHAVE__` starts a timer there, as a negative control.
import { globalScope } from "../workers/global-scope-guard.ts";
import { Redis } from "@upstash/redis/cloudflare";
import {
  createRateLimiter,
  type Decision,
  fixedWindow,
  FloodgateError,
  memoryStore,
  type Policy,
  slidingLog,
  slidingWindow,
  tokenBucket,
  upstashStore,
  withRateLimit,
} from "@floodgate/core";

declare const __MISBEHAVE__: boolean;
if (__MISBEHAVE__) setTimeout(() => undefined, 1000);
globalScope.done();

/** 2023-11-14T22:13:20Z: a whole number of seconds, minutes and hours since the epoch. */
const T0 = 1_700_000_000_000;

/** An injected clock the scenarios move by hand. */
function manualClock(start = T0): { now: () => number; set: (t: number) => void } {
  let t = start;
  return { now: () => t, set: (value) => void (t = value) };
}

/** The figures of a decision, without the class around them. */
function figures(d: Decision): Record<string, unknown> {
  return {
    allowed: d.allowed,
    limit: d.limit,
    remaining: d.remaining,
    resetAt: d.resetAt,
    retryAfterMs: d.retryAfterMs,
    policy: d.policy,
    policies: d.policies.map((p) => ({
      policy: p.policy,
      allowed: p.allowed,
      limit: p.limit,
      remaining: p.remaining,
      retryAfterMs: p.retryAfterMs,
    })),
  };
}

const POLICIES: Record<string, () => Policy> = {
  tokenBucket: () => tokenBucket({ capacity: 3, refillRate: 3, name: "tb" }),
  slidingWindow: () => slidingWindow({ limit: 3, window: "1s", name: "sw" }),
  fixedWindow: () => fixedWindow({ limit: 3, window: "1s", name: "fw" }),
  slidingLog: () => slidingLog({ limit: 3, window: 1000, name: "sl" }),
};

/** One algorithm on a memory store with an injected clock: admit, deny, exact wait, peek, refund, reset. */
async function algorithm(kind: string): Promise<Record<string, unknown>> {
  const clock = manualClock();
  const limiter = createRateLimiter({ policy: POLICIES[kind]!(), store: memoryStore({ maxKeys: 100 }), clock: clock.now });

  // Admit exactly the limit at T0, then deny; the denial charges nothing.
  const admitted: Record<string, unknown>[] = [];
  for (let i = 0; i < 3; i++) admitted.push(figures(await limiter.limit("a")));
  const denied = figures(await limiter.limit("a"));
  const peekAfterDeny = figures(await limiter.peek("a"));
  const wait = denied["retryAfterMs"] as number;
  clock.set(T0 + wait - 1);
  const justBefore = figures(await limiter.limit("a"));
  clock.set(T0 + wait);
  const atRetry = figures(await limiter.limit("a"));

  // peek charges nothing; refund gives units back.
  clock.set(T0);
  const peekFresh = figures(await limiter.peek("b"));
  const peekAgain = figures(await limiter.peek("b"));
  for (let i = 0; i < 3; i++) await limiter.limit("b");
  const fullB = figures(await limiter.peek("b"));
  await limiter.refund("b");
  const afterRefund = figures(await limiter.peek("b"));
  const usesRefund = figures(await limiter.limit("b"));
  const afterRefundUsed = figures(await limiter.limit("b"));

  // reset clears exactly that key.
  for (let i = 0; i < 3; i++) await limiter.limit("c");
  await limiter.limit("d");
  await limiter.reset("c");
  const resetC = figures(await limiter.peek("c"));
  const untouchedD = figures(await limiter.peek("d"));

  return {
    admitted,
    denied,
    peekAfterDeny,
    justBefore,
    atRetry,
    peekFresh,
    peekAgain,
    fullB,
    afterRefund,
    usesRefund,
    afterRefundUsed,
    resetC,
    untouchedD,
  };
}

/** Several policies in one atomic step: a denial by one charges none. */
async function multiPolicy(): Promise<Record<string, unknown>> {
  const clock = manualClock();
  const limiter = createRateLimiter({
    policy: [fixedWindow({ limit: 5, window: "1s", name: "second" }), fixedWindow({ limit: 3, window: "1m", name: "minute" })],
    store: memoryStore(),
    clock: clock.now,
  });
  const first = figures(await limiter.limit("k", { cost: 2 })); // second 3 left, minute 1 left
  const denied = figures(await limiter.limit("k", { cost: 2 })); // minute denies: nothing charged
  const after = figures(await limiter.peek("k"));
  const tooBig = figures(await limiter.limit("k", { cost: 6 })); // larger than "second"'s limit
  const fits = figures(await limiter.limit("k", { cost: 1 }));
  const last = figures(await limiter.limit("k"));
  return { first, denied, after, tooBig, fits, last };
}

/** What a call threw (or rejected with), as plain data. */
async function thrown(call: () => unknown): Promise<Record<string, unknown> | null> {
  try {
    await call();
    return null;
  } catch (error) {
    const e = error as { name?: unknown; code?: unknown; message?: unknown };
    return {
      name: e.name,
      code: e.code,
      message: e.message,
      isFloodgateError: error instanceof FloodgateError,
      isError: error instanceof Error,
    };
  }
}

/** Bad options and bad calls throw FloodgateError with a stable code and change no state. */
async function badInput(): Promise<Record<string, unknown>> {
  const limiter = createRateLimiter({ policy: fixedWindow({ limit: 2, window: "1s" }), clock: () => T0 });
  await limiter.limit("k");
  const errors = {
    negativeCapacity: await thrown(() => tokenBucket({ capacity: -1, refillRate: 1 })),
    zeroWindow: await thrown(() => fixedWindow({ limit: 1, window: 0 })),
    unparsableDuration: await thrown(() => slidingWindow({ limit: 1, window: "soon" as never })),
    unknownOption: await thrown(() => slidingLog({ limit: 1, window: "1s", windowMS: 5 } as never)),
    nanLimit: await thrown(() => fixedWindow({ limit: Number.NaN, window: "1s" })),
    emptyKey: await thrown(() => limiter.limit("")),
    nonStringKey: await thrown(() => limiter.limit(42 as never)),
    zeroCost: await thrown(() => limiter.limit("k", { cost: 0 })),
    fractionalCost: await thrown(() => limiter.limit("k", { cost: 1.5 })),
    infiniteCost: await thrown(() => limiter.limit("k", { cost: Number.POSITIVE_INFINITY })),
  };
  const after = figures(await limiter.peek("k"));
  return { errors, after };
}

/** `withRateLimit` around a `(Request) => Response` handler, called with real Request objects. */
async function fetchWrapper(): Promise<Record<string, unknown>> {
  let calls = 0;
  const handler = withRateLimit(
    (request: Request) => {
      calls++;
      return Response.json({ hello: "browser", path: new URL(request.url).pathname });
    },
    {
      policy: tokenBucket({ capacity: 2, refillRate: 2 / 3600, name: "page" }),
      store: memoryStore(),
      clock: () => T0,
      getClientIp: (request) => request.headers.get("x-test-client") ?? undefined,
    },
  );
  const send = async (client: string, path: string): Promise<Record<string, unknown>> => {
    const request = new Request(new URL(path, location.origin), { headers: { "x-test-client": client } });
    const response = await handler(request);
    return {
      isResponse: response instanceof Response,
      status: response.status,
      headers: Object.fromEntries([...response.headers].filter(([name]) => /ratelimit|retry-after|content-type/.test(name))),
      body: await response.text(),
    };
  };
  const responses = [];
  for (let i = 0; i < 3; i++) responses.push(await send("203.0.113.7", `/api/${i}`));
  const other = await send("203.0.113.8", "/api/other");
  return { responses, other, handlerCalls: calls, requestIsNative: String(Request).includes("[native code]") };
}

/**
 * The Upstash store from the page: `@upstash/redis`'s fetch client against the local bridge
 * (started with `corsOrigin` set to this page's origin), on the Redis server's clock.
 */
async function upstash(bridge: { url: string; token: string; prefix: string }): Promise<Record<string, unknown>> {
  const redis = new Redis({ url: bridge.url, token: bridge.token, enableTelemetry: false });
  const limiter = createRateLimiter({
    policy: slidingLog({ limit: 3, window: "1h", name: "upstash-log" }),
    store: upstashStore({ redis, denyCache: false }),
    prefix: bridge.prefix,
  });
  const decisions: Record<string, unknown>[] = [];
  for (let i = 0; i < 4; i++) decisions.push(figures(await limiter.limit("page-user")));
  const peek = figures(await limiter.peek("page-user"));
  await limiter.reset("page-user");
  const afterReset = figures(await limiter.peek("page-user"));

  const handler = withRateLimit(() => new Response("ok"), {
    policy: tokenBucket({ capacity: 1, refillRate: 1 / 3600, name: "upstash-fetch" }),
    store: upstashStore({ redis }),
    prefix: bridge.prefix,
    getClientIp: () => "203.0.113.99",
  });
  const statuses: number[] = [];
  let retryAfter: string | null = null;
  for (let i = 0; i < 2; i++) {
    const response = await handler(new Request(new URL("/upstash", location.origin)));
    statuses.push(response.status);
    if (response.status === 429) retryAfter = response.headers.get("retry-after");
    await response.text();
  }
  return { decisions, peek, afterReset, statuses, retryAfter };
}

const SCENARIOS: Record<string, (argument: never) => Promise<Record<string, unknown>>> = {
  tokenBucket: () => algorithm("tokenBucket"),
  slidingWindow: () => algorithm("slidingWindow"),
  fixedWindow: () => algorithm("fixedWindow"),
  slidingLog: () => algorithm("slidingLog"),
  multiPolicy,
  badInput,
  fetchWrapper,
  upstash,
};

(globalThis as unknown as Record<string, unknown>)["floodgateBrowser"] = {
  /** Timer, fetch and random-value calls made while the modules were evaluated (empty when clean). */
  globalScopeCalls: globalScope.calls,
  run(name: string, argument?: unknown): Promise<Record<string, unknown>> {
    const scenario = SCENARIOS[name];
    if (scenario === undefined) return Promise.reject(new Error(`no scenario ${name}`));
    return scenario(argument as never);
  },
};
