import { type Duration, DURATION_ACCEPTED, durationMs } from "../duration.ts";
import { FloodgateError } from "../errors.ts";
import type { Policy } from "../policy.ts";
import { type OptionSpecs, parseOptions } from "../validation.ts";
import { ALGORITHM, type Algorithm, type AlgorithmDefinition, type AlgorithmTraits, type LuaAlgorithm } from "./algorithm.ts";
import { refundLog, removeEntries, SLIDING_LOG, SLIDING_LOG_LUA } from "./sliding-log.ts";
import { LIMIT, MAX_LIMIT_TIMES_WINDOW, NAME } from "./window-options.ts";

/** How long a unit stays held when its reservation is never settled, by default: one minute. */
export const DEFAULT_CONCURRENCY_TIMEOUT_MS = 60_000;

/** Options of {@link concurrency}. */
export interface ConcurrencyOptions {
  /** Requests in flight at once, per key: a whole number >= 1. */
  limit: number;
  /**
   * How long a unit stays held when its reservation is never settled or cancelled (a holder
   * that crashed): milliseconds or a string such as `"30s"`; default `"1m"`. Set it above your
   * slowest request: a request still running past it no longer counts.
   */
  timeout?: Duration;
  /** Policy name; default `"<limit>-concurrent"`. */
  name?: string;
}

const CONCURRENCY_OPTIONS: OptionSpecs = {
  limit: LIMIT,
  timeout: [(v) => durationMs(v) !== undefined, DURATION_ACCEPTED],
  name: NAME,
};

/**
 * A unit is held by one request, not spent, and comes back when its holder settles (in any
 * process): never leased, and a denial is not cached.
 */
const CONCURRENCY_TRAITS: AlgorithmTraits = { lease: undefined, holdsUnits: true, cachesDenials: false };

/**
 * In flight: a sliding log whose window is the timeout, holding one entry per reservation
 * (whatever its estimate) from when it was admitted. Settling or cancelling the reservation
 * removes its entry (the mark is its timestamp); an entry never removed leaves the log after the
 * timeout, as a sliding log's entries leave its window. So at most `limit` reservations are held
 * at once, and a crashed holder's unit comes back after `timeout`, not before.
 */
export const CONCURRENCY: Algorithm = /* @__PURE__ */ (() => ({
  traits: CONCURRENCY_TRAITS,
  width: SLIDING_LOG.width,
  keepsLog: true,
  apply: (p, s, o, log, now, _cost, out, i, charge) => SLIDING_LOG.apply(p, s, o, log, now, 1, out, i, charge),
  mark: SLIDING_LOG.mark,
  // Into a mark: the request's one unit; without one (a manual correction), the newest `cost`.
  refund: (p, s, o, log, now, cost, mark) => refundLog(p, s, o, log, now, mark === undefined ? cost : 1, mark),
  // Whatever the request cost, it is no longer in flight.
  settle: (p, s, o, log, _now, _estimate, _actual, mark) => removeEntries(p, s, o, log!, 1, mark),
  accepts: SLIDING_LOG.accepts,
}))();

/**
 * An in-flight (concurrency) limit: at most `limit` requests per key at once. A request holds a
 * unit from `limiter.reserve()` until its reservation is settled or cancelled, and at most
 * `timeout` (a holder that crashed is released then). Each reservation holds one unit, whatever
 * its estimate: in a set with a token budget (`[concurrency({ limit: 2 }), tokenBucket(...)]`)
 * the estimate goes to the budget, one unit to the concurrency limit, atomically. `limit()`
 * rejects a limiter with a concurrency policy (it has no way to release); `peek()` reports it.
 * `resetAt` is when the newest holder's timeout ends; `retryAfterMs`, when the oldest one's
 * does: the latest a unit comes back, earlier when a holder settles.
 *
 * @example
 * const limiter = createRateLimiter({ policy: [concurrency({ limit: 2, timeout: "2m" }), tokenBucket({ capacity: 10_000, refillRate: 100 })] });
 * const r = await limiter.reserve("key:1", { estimate: 500 });
 * if (r.decision.allowed) { try { await r.settle(await work()); } catch (e) { await r.cancel(); throw e; } }
 */
export function concurrency(options: ConcurrencyOptions): Policy {
  const o = parseOptions<ConcurrencyOptions>(options, "concurrency()", CONCURRENCY_OPTIONS);
  const timeoutMs = o.timeout === undefined ? DEFAULT_CONCURRENCY_TIMEOUT_MS : durationMs(o.timeout)!;
  if (o.limit * timeoutMs > MAX_LIMIT_TIMES_WINDOW) {
    throw new FloodgateError(
      "INVALID_OPTION",
      `concurrency(): \`limit\` × \`timeout\` is too large (${o.limit} × ${timeoutMs} ms); expected limit × timeout in ms <= ${MAX_LIMIT_TIMES_WINDOW}.`,
    );
  }
  return Object.freeze({
    kind: "concurrency" as const,
    name: o.name ?? `${o.limit}-concurrent`,
    limit: o.limit,
    windowMs: timeoutMs,
    refillRate: 0,
    intervalMs: 0,
    // No `block`: a unit comes back when its holder ends, so a block would outlast the cause.
    blockMs: 0,
    [ALGORITHM]: CONCURRENCY,
  });
}

/** The sliding log's fragments with a cost of one unit (a Lua block scopes the `cost` it sees). */
const oneUnit = (fragment: string): string => `do local cost = 1\n${fragment}end\n`;

/** Redis state: the sliding log's, a list of µs timestamps (one per holder), oldest first. */
const CONCURRENCY_LUA: LuaAlgorithm = /* @__PURE__ */ (() => ({
  code: "c",
  parameter: (p: Policy) => p.windowMs,
  fragments: {
    eval: oneUnit(SLIDING_LOG_LUA.fragments.eval),
    commit: oneUnit(SLIDING_LOG_LUA.fragments.commit),
    refund: `do local cost = m and 1 or cost\n${SLIDING_LOG_LUA.fragments.refund}end\n`,
    settle: `redis.pcall("LREM", k, "-1", fmt("%d", m))\n`,
  },
}))();

export const CONCURRENCY_DEFINITION: AlgorithmDefinition<"concurrency"> = {
  traits: CONCURRENCY_TRAITS,
  kind: "concurrency",
  factoryName: "concurrency",
  lua: CONCURRENCY_LUA,
  docs: {
    call: "concurrency({ limit, timeout })",
    statePerKey: "one timestamp per request in flight",
    guarantee: "at most `limit` reservations held at once; one never settled is released after `timeout`",
    resetAt: "when the newest holder's timeout ends",
  },
  exampleOptions: (limit, windowMs, name): ConcurrencyOptions =>
    name === undefined ? { limit, timeout: windowMs } : { limit, timeout: windowMs, name },
  retentionMs: (p) => p.windowMs,
};
