/**
 * The rows of the core benchmark, shared by its two harnesses: `bench/core.ts` (time, with
 * mitata) and `bench/core-instructions.ts` (machine instructions, under callgrind). Each row is a
 * subject (an algorithm through `limit()` or `decide()`, or a peer) in a scenario; see
 * `bench/core.ts` for what each scenario and peer is.
 */
import { RateLimiterMemory } from "rate-limiter-flexible";
import { MemoryStore } from "express-rate-limit";
import {
  createRateLimiter,
  fixedWindow,
  memoryStore,
  slidingLog,
  slidingWindow,
  tokenBucket,
  type Policy,
} from "../packages/core/src/index.ts";

const T0 = 1_700_000_000_000;
const DISTINCT = 100_000;
const KEYS = Array.from({ length: DISTINCT }, (_, i) => `user:${i}`);
const HOT = "user:hot";
const DAY = 86_400_000;

export type Scenario = "hot key" | "hot key, Date.now" | "100k keys" | "100k keys, 1M cap" | "mostly denied";
export const SCENARIOS: readonly Scenario[] = ["hot key", "hot key, Date.now", "100k keys", "100k keys, 1M cap", "mostly denied"];
/** The peers' rows each Floodgate scenario is compared with (the peers have no clock or bound to vary). */
export const PEER_SCENARIO: Record<Scenario, Scenario> = {
  "hot key": "hot key",
  "hot key, Date.now": "hot key",
  "100k keys": "100k keys",
  "100k keys, 1M cap": "100k keys",
  "mostly denied": "mostly denied",
};
export const ADMIT_SCENARIO: Partial<Record<Scenario, Scenario>> = { "mostly denied": "hot key" };
/** The sliding log is left out of the Date.now row: at millions of admissions per second it would log millions of timestamps. */
export const skip = (algorithm: string, scenario: Scenario): boolean => scenario === "hot key, Date.now" && algorithm === "slidingLog";

export const ALGORITHMS: Record<string, (limit: number, windowMs: number) => Policy> = {
  tokenBucket: (limit, windowMs) => tokenBucket({ capacity: limit, refillRate: (limit * 1000) / windowMs }),
  slidingWindow: (limit, windowMs) => slidingWindow({ limit, window: windowMs }),
  fixedWindow: (limit, windowMs) => fixedWindow({ limit, window: windowMs }),
  slidingLog: (limit, windowMs) => slidingLog({ limit, window: windowMs }),
};
export const PEERS = ["rate-limiter-flexible", "express-rate-limit MemoryStore", "async Map counter", "async no-op (floor)", "Date.now() alone"] as const;
export const ERL = PEERS[1];
export const MAP = PEERS[2];
export const NOOP = PEERS[3];
/**
 * The default clock read on its own, synchronously: what every decision on the real clock pays
 * (Floodgate's default clock, and express-rate-limit's `increment`, which calls `Date.now()`
 * too). It does not depend on the scenario, so it has one row, beside the hot key.
 */
export const CLOCK = PEERS[4];
export const peerRuns = (name: (typeof PEERS)[number], scenario: Scenario): boolean => name !== CLOCK || scenario === "hot key";

const ignore = (): void => {};

/**
 * Floodgate's subjects: each algorithm through `limit()` (a promise, awaited like every peer row)
 * and through `decide()` (the same decision, returned synchronously because the memory store
 * answers synchronously: what the HTTP middleware uses).
 */
export const DECIDE = " decide()";
export const SUBJECTS = Object.keys(ALGORITHMS).flatMap((a) => [a, `${a}${DECIDE}`]);
export const algorithmOf = (subject: string): string => subject.replace(DECIDE, "");

/** Returns the function to measure, after tracking every key it will touch (setup is not timed). */
export async function floodgate(subject: string, scenario: Scenario): Promise<() => unknown> {
  const algorithm = algorithmOf(subject);
  const sync = subject.endsWith(DECIDE);
  let now = T0;
  const step = scenario === "hot key" ? 20 : scenario === "mostly denied" ? 1 : 0.001;
  const policy = scenario === "mostly denied"
    ? ALGORITHMS[algorithm]!(1, DAY)
    : scenario === "hot key, Date.now"
      ? ALGORITHMS[algorithm]!(1e9, 1_000_000)
      : ALGORITHMS[algorithm]!(100, 1000);
  const limiter = createRateLimiter({
    policy,
    store: scenario === "100k keys, 1M cap" ? memoryStore({ maxKeys: 1_000_000 }) : memoryStore(),
    ...(scenario === "hot key, Date.now" ? {} : { clock: () => (now += step) }),
  });
  if (scenario.startsWith("100k keys")) {
    for (const key of KEYS) await limiter.limit(key);
    let i = 0;
    return sync
      ? () => {
        const key = KEYS[i]!;
        if (++i === DISTINCT) i = 0;
        return limiter.decide(key);
      }
      : () => {
        const key = KEYS[i]!;
        if (++i === DISTINCT) i = 0;
        return limiter.limit(key);
      };
  }
  await limiter.limit(HOT);
  if (scenario === "mostly denied" && (await limiter.limit(HOT)).allowed) throw new Error("expected a denial");
  return sync ? () => limiter.decide(HOT) : () => limiter.limit(HOT);
}

export async function peer(name: (typeof PEERS)[number], scenario: Scenario): Promise<{ fn: () => unknown; dispose(): void }> {
  let call: (key: string) => unknown;
  let dispose = ignore;
  if (name === "rate-limiter-flexible") {
    const rlf = scenario === "mostly denied"
      ? new RateLimiterMemory({ points: 1, duration: DAY / 1000 })
      : new RateLimiterMemory({ points: 1e12, duration: 1 });
    call = (key) => rlf.consume(key).catch(ignore);
  } else if (name === ERL) {
    const store = new MemoryStore();
    store.init({ windowMs: 60_000 } as Parameters<MemoryStore["init"]>[0]);
    call = (key) => store.increment(key);
    dispose = () => store.shutdown();
  } else if (name === NOOP) {
    // The cheapest promise-returning call there is: what awaiting any async API costs here
    // (an async function on purpose, like the APIs it stands for).
    // deno-lint-ignore require-await
    call = async () => 1;
  } else if (name === CLOCK) {
    call = () => Date.now();
  } else {
    const counts = new Map<string, number>();
    // An async function on purpose: the "async Map counter" row is an async store call at its simplest.
    // deno-lint-ignore require-await
    call = async (key) => {
      const n = (counts.get(key) ?? 0) + 1;
      counts.set(key, n);
      return n;
    };
  }
  if (scenario === "100k keys") {
    for (const key of KEYS) await call(key);
    let i = 0;
    return {
      fn: () => {
        const key = KEYS[i]!;
        if (++i === DISTINCT) i = 0;
        return call(key);
      },
      dispose,
    };
  }
  await call(HOT);
  return { fn: () => call(HOT), dispose };
}

/** Runs every Floodgate path, so that each row is measured with the engine's call sites in the
 * state a process using all four algorithms reaches, whatever the order of the rows. */
export async function warmUp(): Promise<void> {
  for (const scenario of SCENARIOS) {
    for (const subject of SUBJECTS) {
      if (skip(algorithmOf(subject), scenario) || scenario.startsWith("100k keys")) continue;
      const fn = await floodgate(subject, scenario);
      for (let i = 0; i < 20_000; i++) await fn();
    }
  }
}
