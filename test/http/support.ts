// Helpers shared by the HTTP tests: an injected clock, a recording logger, a store that fails on
// demand, and header parsing through independent parsers.
import { FloodgateError, memoryStore, type RateLimitInfo, type RateLimitStore } from "@floodgate/core";
import { parseRateLimit } from "ratelimit-header-parser";
import { parseList } from "structured-headers";

/** Aligned to a minute, so fixed windows reset exactly 60 s later. */
export const T0 = 1_700_000_040_000;

export interface Env {
  now: number;
  advance(ms: number): void;
  clock: () => number;
  logs: string[];
  logger: { warn(message: string): void };
  decisions: RateLimitInfo[];
  limited: RateLimitInfo[];
  storeErrors: FloodgateError[];
  /** A store a scenario made in its options, for its run to inspect. */
  store?: RateLimitStore;
}

export function createEnv(): Env {
  const env: Env = {
    now: T0,
    advance: (ms) => {
      env.now += ms;
    },
    clock: () => env.now,
    logs: [],
    logger: { warn: (message) => env.logs.push(message) },
    decisions: [],
    limited: [],
    storeErrors: [],
  };
  return env;
}

export type FlakyMode = "ok" | "throw" | "hang";

/** A memory store that can be told to throw or to hang; counts the calls that reach it. */
export function flakyStore(initial: FlakyMode): RateLimitStore & { mode: FlakyMode; calls: number } {
  const inner = memoryStore();
  const store = {
    name: "flaky",
    mode: initial,
    calls: 0,
    consume(...args: Parameters<RateLimitStore["consume"]>) {
      store.calls++;
      if (store.mode === "throw") return Promise.reject(new Error("connection refused"));
      if (store.mode === "hang") return new Promise<never>(() => {});
      return inner.consume(...args);
    },
    peek: (...args: Parameters<RateLimitStore["peek"]>) => inner.peek(...args),
    refund(...args: Parameters<RateLimitStore["refund"]>) {
      if (store.mode !== "ok") return Promise.reject(new Error("connection refused"));
      return inner.refund(...args);
    },
    reset: (...args: Parameters<RateLimitStore["reset"]>) => inner.reset(...args),
  };
  return store;
}

/** Legacy `X-RateLimit-*` headers, read by ratelimit-header-parser (reset as epoch seconds). */
export function legacyHeaders(headers: Headers, reset: "unix" | "seconds" = "unix") {
  const only: Record<string, string> = {};
  headers.forEach((value, name) => {
    if (name.startsWith("x-ratelimit-")) only[name] = value;
  });
  return parseRateLimit(only, { reset });
}

/** draft-6 or draft-7 headers, read by ratelimit-header-parser. */
export function draftHeaders(headers: Headers) {
  const only: Record<string, string> = {};
  headers.forEach((value, name) => {
    if (name.startsWith("ratelimit")) only[name] = value;
  });
  return parseRateLimit(only, { reset: "seconds" });
}

export interface IetfPolicy {
  q: number;
  w: number;
  r: number;
  t: number;
}

/** Current-draft `RateLimit-Policy` + `RateLimit`, read as RFC 9651 lists by structured-headers. */
export function ietfHeaders(headers: Headers): Record<string, IetfPolicy> {
  const out: Record<string, IetfPolicy> = {};
  const policy = headers.get("ratelimit-policy");
  const limit = headers.get("ratelimit");
  if (policy === null || limit === null) return out;
  for (const [name, params] of parseList(policy)) {
    out[String(name)] = { q: Number(params.get("q")), w: Number(params.get("w")), r: NaN, t: NaN };
  }
  for (const [name, params] of parseList(limit)) {
    const entry = out[String(name)]!;
    entry.r = Number(params.get("r"));
    entry.t = Number(params.get("t"));
  }
  return out;
}

export const RATE_LIMIT_HEADERS = [
  "x-ratelimit-limit",
  "x-ratelimit-remaining",
  "x-ratelimit-reset",
  "ratelimit",
  "ratelimit-policy",
  "ratelimit-limit",
  "ratelimit-remaining",
  "ratelimit-reset",
  "retry-after",
];

export const hasRateLimitHeaders = (headers: Headers): boolean => RATE_LIMIT_HEADERS.some((h) => headers.has(h));
