/**
 * The rows of the core benchmark, shared by its two harnesses: `bench/core.ts` (time, with
 * mitata) and `bench/core-instructions.ts` (machine instructions, under callgrind). Each row is a
 * subject (an algorithm through `limit()` or `decide()`, or a peer) in a scenario; see
 * `bench/core.ts` for what each scenario and peer is.
 */
import { RateLimiterMemory } from "rate-limiter-flexible";
import { MemoryStore } from "express-rate-limit";
import type { Policy } from "../packages/core/src/index.ts";
import { type Copy, type Core, loadCore } from "./copies.ts";

const T0 = 1_700_000_000_000;
const DISTINCT = 100_000;
const KEYS = Array.from({ length: DISTINCT }, (_, i) => `user:${i}`);
const HOT = "user:hot";
const DAY = 86_400_000;

export type Scenario = "hot key" | "hot key, Date.now" | "100k keys" | "100k keys, 1M cap" | "mostly denied";
export const SCENARIOS: readonly Scenario[] = ["hot key", "hot key, Date.now", "100k keys", "100k keys, 1M cap", "mostly denied"];
/** Short names of the scenarios, for flags. */
export const SCENARIO_NAMES: Record<string, Scenario> = {
  hot: "hot key",
  now: "hot key, Date.now",
  "100k": "100k keys",
  "1m": "100k keys, 1M cap",
  denied: "mostly denied",
};
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

export const ALGORITHMS: Record<string, (core: Core, limit: number, windowMs: number) => Policy> = {
  tokenBucket: (core, limit, windowMs) => core.tokenBucket({ capacity: limit, refillRate: (limit * 1000) / windowMs }),
  slidingWindow: (core, limit, windowMs) => core.slidingWindow({ limit, window: windowMs }),
  fixedWindow: (core, limit, windowMs) => core.fixedWindow({ limit, window: windowMs }),
  slidingLog: (core, limit, windowMs) => core.slidingLog({ limit, window: windowMs }),
};
export const PEERS = [
  "rate-limiter-flexible",
  "express-rate-limit MemoryStore",
  "async Map counter",
  "async no-op (floor)",
  "Date.now() alone",
] as const;
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
 * answers synchronously: what the HTTP middleware uses), for every copy of Floodgate measured
 * (a copy's suffix, e.g. " (baseline)", ends the name). One more reference row per algorithm, for
 * the working tree only: `decide()` wrapped in `Promise.resolve`, awaited. That is the least a
 * promise of a decision costs (the decision, one promise holding it, one await), the floor of
 * `limit()`.
 */
export const DECIDE = " decide()";
export const FLOOR = " decide() + one awaited promise";
/**
 * The other floor of `limit()`, for the instruction harness only: `decide()` called from an
 * async function (`async (key) => limiter.decide(key)`), awaited: the same work behind the
 * promise every async API returns (express-rate-limit's `increment` is one).
 */
export const ASYNC_FLOOR = " decide() in an awaited async function";
const APIS = ["", DECIDE] as const;
let subjects: string[] = [];
const cores = new Map<string, Core>();
/** Every subject of the loaded copies (see {@link useCopies}). */
export const subjectsOf = (): readonly string[] => subjects;
/** Loads each copy's `@floodgate/core`; its subjects are the rows measured from then on. The first copy also gets the floor rows. */
export async function useCopies(list: readonly Copy[]): Promise<void> {
  for (const copy of list) cores.set(copy.suffix, await loadCore(copy));
  subjects = list.flatMap((copy, i) =>
    Object.keys(ALGORITHMS).flatMap((a) => [...APIS.map((api) => `${a}${api}${copy.suffix}`), ...(i === 0 ? [`${a}${FLOOR}`] : [])])
  );
}
/** The suffix of the subject's copy ("" for the working tree). */
export const copyOf = (subject: string): string => [...cores.keys()].find((suffix) => suffix !== "" && subject.endsWith(suffix)) ?? "";
export const algorithmOf = (subject: string): string => subject.split(" ")[0]!;
/** The same subject in the working tree's copy. */
export const currentOf = (subject: string): string => subject.slice(0, subject.length - copyOf(subject).length);

/** Returns the function to measure, after tracking every key it will touch (setup is not timed). */
export async function floodgate(subject: string, scenario: Scenario): Promise<() => unknown> {
  const algorithm = algorithmOf(subject);
  const core = cores.get(copyOf(subject));
  if (core === undefined) throw new Error(`no copy of Floodgate loaded for ${subject} (call useCopies first)`);
  const api = currentOf(subject).slice(algorithm.length);
  const { createRateLimiter, memoryStore } = core;
  let now = T0;
  const step = scenario === "hot key" ? 20 : scenario === "mostly denied" ? 1 : 0.001;
  const policy = scenario === "mostly denied"
    ? ALGORITHMS[algorithm]!(core, 1, DAY)
    : scenario === "hot key, Date.now"
    ? ALGORITHMS[algorithm]!(core, 1e9, 1_000_000)
    : ALGORITHMS[algorithm]!(core, 100, 1000);
  const limiter = createRateLimiter({
    policy,
    store: scenario === "100k keys, 1M cap" ? memoryStore({ maxKeys: 1_000_000 }) : memoryStore(),
    ...(scenario === "hot key, Date.now" ? {} : { clock: () => (now += step) }),
  });
  // Each API's row calls it directly (no shared wrapper), as an application's call site would.
  if (scenario.startsWith("100k keys")) {
    for (const key of KEYS) await limiter.limit(key);
    let i = 0;
    if (api === DECIDE) {
      return () => {
        const key = KEYS[i]!;
        if (++i === DISTINCT) i = 0;
        return limiter.decide(key);
      };
    }
    if (api === FLOOR) {
      return () => {
        const key = KEYS[i]!;
        if (++i === DISTINCT) i = 0;
        return Promise.resolve(limiter.decide(key));
      };
    }
    if (api === ASYNC_FLOOR) {
      // deno-lint-ignore require-await
      return async () => {
        const key = KEYS[i]!;
        if (++i === DISTINCT) i = 0;
        return limiter.decide(key);
      };
    }
    return () => {
      const key = KEYS[i]!;
      if (++i === DISTINCT) i = 0;
      return limiter.limit(key);
    };
  }
  await limiter.limit(HOT);
  if (scenario === "mostly denied" && (await limiter.limit(HOT)).allowed) throw new Error("expected a denial");
  if (api === DECIDE) return () => limiter.decide(HOT);
  if (api === FLOOR) return () => Promise.resolve(limiter.decide(HOT));
  // deno-lint-ignore require-await
  if (api === ASYNC_FLOOR) return async () => limiter.decide(HOT);
  return () => limiter.limit(HOT);
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
    for (const subject of subjects) {
      if (skip(algorithmOf(subject), scenario) || scenario.startsWith("100k keys")) continue;
      const fn = await floodgate(subject, scenario);
      for (let i = 0; i < 20_000; i++) await fn();
    }
  }
}
