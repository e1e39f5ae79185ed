/**
 * The playground's simulator, shared by the page (bundled for the browser) and by the script that
 * renders the guide's figures (Node). It runs the real engine through `@floodgate/core`'s public
 * API only, on simulated time: each limiter gets an injected clock that the simulation moves from
 * one request to the next, so nothing ever waits.
 */
import {
  createRateLimiter,
  fixedWindow,
  memoryStore,
  type Policy,
  type PolicyKind,
  type RateLimiter,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from "@floodgate/core";

/** 2026-01-01T00:00:00Z: a multiple of every window that divides a day, so windows align with it. */
export const EPOCH_MS = 1_767_225_600_000;
/** Where traces that are not tied to a window boundary start: half a minute past EPOCH_MS. */
export const START_MS = EPOCH_MS + 30_000;
/** The one key every request is counted under: one client, one API key, or the whole service. */
export const KEY = "api";
/** The most requests one simulation may make per algorithm, so the page stays responsive. */
export const MAX_REQUESTS = 50_000;
export const MAX_INSTANCES = 4;

/** The four algorithms, in the order they are shown. */
export const ALGORITHMS: readonly PolicyKind[] = ["token-bucket", "sliding-window", "fixed-window", "sliding-log"];

export const ALGORITHM_LABELS: Record<PolicyKind, string> = {
  "token-bucket": "Token bucket",
  "sliding-window": "Sliding window counter",
  "fixed-window": "Fixed window",
  "sliding-log": "Sliding log",
  concurrency: "Concurrency",
  "calendar-window": "Calendar window",
};

/** The parameters of every algorithm: the token bucket's, and one set for the three window kinds. */
export interface AlgorithmParams {
  /** Token bucket: the largest burst admitted at once. */
  capacity: number;
  /** Token bucket: `refillTokens` tokens are added every `refillPeriodMs`, continuously. */
  refillTokens: number;
  refillPeriodMs: number;
  /** Window kinds: requests admitted per window. */
  limit: number;
  windowMs: number;
}

export type Pattern =
  /** `perSide` requests spread evenly over the `spreadMs` before a window boundary, and as many over the `spreadMs` after it. */
  | { kind: "boundary"; perSide: number; spreadMs: number }
  /** `burst` requests at once at t = 0, then `ratePerS` requests per second, evenly spaced, for `durationS` seconds. */
  | { kind: "burst-then-steady"; burst: number; ratePerS: number; durationS: number }
  /** Requests arriving as a Poisson process of `ratePerS` per second for `durationS` seconds, from a seeded generator. */
  | { kind: "poisson"; ratePerS: number; durationS: number; seed: number }
  /**
   * `clients` clients, each sending a request every `thinkMs` once admitted; a denied client waits
   * the response's Retry-After (whole seconds, rounded up, as the HTTP layer sends it) and retries.
   * Each client's first request comes at a seeded random moment within the first `thinkMs`.
   */
  | { kind: "retry-storm"; clients: number; thinkMs: number; durationS: number; seed: number }
  /** Requests at the given milliseconds after EPOCH_MS (a window boundary for every window dividing a day). */
  | { kind: "custom"; timesMs: number[] };

export type PatternKind = Pattern["kind"];

export const PATTERN_LABELS: Record<PatternKind, string> = {
  boundary: "Boundary burst",
  "burst-then-steady": "Burst then steady",
  poisson: "Steady (Poisson)",
  "retry-storm": "Retry storm",
  custom: "Custom timestamps",
};

export interface Scenario {
  params: AlgorithmParams;
  pattern: Pattern;
  /** Application instances, each with its own limiter; requests reach them in turn (round robin). */
  instances: number;
  /**
   * False (the default, and the right setup): the instances' limiters share one memory store, so
   * they enforce one limit together. True: each instance has its own store, and each admits the
   * full limit on its own.
   */
  separateStores?: boolean;
  /** Which algorithms to run; default all four. */
  algorithms?: readonly PolicyKind[];
}

export interface SimulatedRequest {
  /** Ms after the trace's origin. */
  readonly t: number;
  /** Index of the instance that handled it. */
  readonly instance: number;
  readonly allowed: boolean;
}

export interface AlgorithmRun {
  readonly kind: PolicyKind;
  readonly label: string;
  /** The policy's own description of itself, e.g. "100-per-1m". */
  readonly policyName: string;
  /** A short human description of the parameters, e.g. "100 per 60 s". */
  readonly description: string;
  readonly requests: readonly SimulatedRequest[];
  readonly admitted: number;
  readonly denied: number;
  /** Per instance: requests it admitted and denied. */
  readonly perInstance: readonly { readonly admitted: number; readonly denied: number }[];
}

export interface SimulationResult {
  readonly scenario: Scenario;
  /** Epoch ms of t = 0. */
  readonly originMs: number;
  /** What t = 0 is, for the time axis. */
  readonly originLabel: string;
  /** The time range to show, in ms after the origin. */
  readonly fromMs: number;
  readonly toMs: number;
  readonly runs: readonly AlgorithmRun[];
}

/** A bad scenario: the message says what was wrong and what is accepted. */
export class ScenarioError extends Error {
  override readonly name = "ScenarioError";
}

/** The two seed scenarios of the guide (the same ones `npm run demo` prints). */
export const SEED_SCENARIOS = {
  "boundary-burst": {
    params: { capacity: 100, refillTokens: 100, refillPeriodMs: 60_000, limit: 100, windowMs: 60_000 },
    pattern: { kind: "boundary", perSide: 100, spreadMs: 1000 },
    instances: 1,
  },
  "burst-then-steady": {
    params: { capacity: 100, refillTokens: 10, refillPeriodMs: 1000, limit: 100, windowMs: 10_000 },
    pattern: { kind: "burst-then-steady", burst: 150, ratePerS: 50, durationS: 12 },
    instances: 1,
  },
} as const satisfies Record<string, Scenario>;

export type SeedName = keyof typeof SEED_SCENARIOS;

/** Default parameters of each pattern when it is picked in the page. */
export const DEFAULT_PATTERNS: Record<PatternKind, Pattern> = {
  boundary: { kind: "boundary", perSide: 100, spreadMs: 1000 },
  "burst-then-steady": { kind: "burst-then-steady", burst: 150, ratePerS: 50, durationS: 12 },
  poisson: { kind: "poisson", ratePerS: 20, durationS: 30, seed: 1 },
  "retry-storm": { kind: "retry-storm", clients: 60, thinkMs: 2000, durationS: 30, seed: 1 },
  custom: { kind: "custom", timesMs: [0, 100, 200, 300, 59_900, 59_950, 60_000, 60_050, 60_100, 90_000] },
};

/** A small, fast, seeded generator (mulberry32): the same seed gives the same traffic everywhere. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

function check(ok: boolean, message: string): void {
  if (!ok) throw new ScenarioError(message);
}

const isWhole = (v: number, min: number, max: number): boolean => Number.isInteger(v) && v >= min && v <= max;
const isPositive = (v: number, max: number): boolean => Number.isFinite(v) && v > 0 && v <= max;

/** The policy of one algorithm for these parameters (built by core's factories, which validate them too). */
export function policyFor(kind: PolicyKind, params: AlgorithmParams): Policy {
  switch (kind) {
    case "token-bucket":
      check(
        isPositive(params.refillPeriodMs, 86_400_000),
        `The refill period must be more than 0 and at most a day; received ${params.refillPeriodMs} ms.`,
      );
      return tokenBucket({ capacity: params.capacity, refillRate: (params.refillTokens * 1000) / params.refillPeriodMs });
    case "sliding-window":
      return slidingWindow({ limit: params.limit, window: params.windowMs });
    case "fixed-window":
      return fixedWindow({ limit: params.limit, window: params.windowMs });
    case "sliding-log":
      return slidingLog({ limit: params.limit, window: params.windowMs });
    case "concurrency":
      // Requests in flight, not requests over time: the playground simulates rates only.
      throw new ScenarioError("The playground simulates rate limits; a concurrency limit counts requests in flight.");
    case "calendar-window":
      // Periods of days and months: too long for a trace of seconds.
      throw new ScenarioError("The playground's traces last seconds; a calendar window counts local days, weeks or months.");
  }
}

/** "1.5 s", "250 ms", "2 min": a duration for people. */
export function formatMs(ms: number): string {
  if (ms >= 60_000 && ms % 60_000 === 0) return `${ms / 60_000} min`;
  if (ms >= 1000) return `${+(ms / 1000).toFixed(3)} s`;
  return `${+ms.toFixed(3)} ms`;
}

export function describeParams(kind: PolicyKind, params: AlgorithmParams): string {
  return kind === "token-bucket"
    ? `capacity ${params.capacity}, refill ${params.refillTokens} per ${
      params.refillPeriodMs === 1000 ? "second" : formatMs(params.refillPeriodMs)
    }`
    : `${params.limit} per ${formatMs(params.windowMs)}`;
}

interface Trace {
  originMs: number;
  originLabel: string;
  fromMs: number;
  toMs: number;
  /** Fixed arrival times (ms after the origin), ascending; absent for traffic that reacts to decisions. */
  timesMs?: number[];
}

/** The arrival times of the patterns that do not depend on the decisions. */
function traceOf(pattern: Pattern, params: AlgorithmParams): Trace {
  switch (pattern.kind) {
    case "boundary": {
      check(
        isWhole(pattern.perSide, 1, MAX_REQUESTS / 2),
        `Requests on each side of the boundary must be a whole number from 1 to ${MAX_REQUESTS / 2}; received ${pattern.perSide}.`,
      );
      check(
        isPositive(pattern.spreadMs, 3_600_000),
        `The spread on each side of the boundary must be more than 0 ms and at most an hour; received ${pattern.spreadMs} ms.`,
      );
      check(isPositive(params.windowMs, 86_400_000 * 365), `The window must be more than 0 ms; received ${params.windowMs} ms.`);
      // The first boundary of the window kinds' windows at least one spread after EPOCH_MS.
      const boundary = Math.ceil((EPOCH_MS + pattern.spreadMs) / params.windowMs) * params.windowMs;
      const step = pattern.spreadMs / pattern.perSide;
      const timesMs: number[] = [];
      for (let i = 0; i < pattern.perSide; i++) timesMs.push(-pattern.spreadMs + i * step);
      for (let i = 0; i < pattern.perSide; i++) timesMs.push(i * step);
      return {
        originMs: boundary,
        originLabel: "the window boundary",
        fromMs: -1.5 * pattern.spreadMs,
        toMs: 1.5 * pattern.spreadMs,
        timesMs,
      };
    }
    case "burst-then-steady": {
      check(
        isWhole(pattern.burst, 0, MAX_REQUESTS),
        `The burst must be a whole number of requests from 0 to ${MAX_REQUESTS}; received ${pattern.burst}.`,
      );
      check(
        isPositive(pattern.ratePerS, 10_000),
        `The steady rate must be more than 0 and at most 10000 requests per second; received ${pattern.ratePerS}.`,
      );
      check(
        isPositive(pattern.durationS, 86_400),
        `The duration must be more than 0 s and at most a day; received ${pattern.durationS} s.`,
      );
      const steady = Math.floor(pattern.ratePerS * pattern.durationS);
      check(
        pattern.burst + steady <= MAX_REQUESTS,
        `That is ${pattern.burst + steady} requests; the playground simulates at most ${MAX_REQUESTS}.`,
      );
      const timesMs: number[] = new Array<number>(pattern.burst).fill(0);
      // The same spacing as the demo: the i-th request of each second at i / rate, i from 1.
      for (let i = 1; i <= steady; i++) timesMs.push((i * 1000) / pattern.ratePerS);
      return { originMs: START_MS, originLabel: "the start", fromMs: 0, toMs: pattern.durationS * 1000, timesMs };
    }
    case "poisson": {
      check(
        isPositive(pattern.ratePerS, 10_000),
        `The rate must be more than 0 and at most 10000 requests per second; received ${pattern.ratePerS}.`,
      );
      check(
        isPositive(pattern.durationS, 86_400),
        `The duration must be more than 0 s and at most a day; received ${pattern.durationS} s.`,
      );
      check(
        pattern.ratePerS * pattern.durationS <= MAX_REQUESTS,
        `That is about ${Math.round(pattern.ratePerS * pattern.durationS)} requests; the playground simulates at most ${MAX_REQUESTS}.`,
      );
      check(isWhole(pattern.seed, 0, 2 ** 32 - 1), `The seed must be a whole number from 0 to 4294967295; received ${pattern.seed}.`);
      const random = seededRandom(pattern.seed);
      const end = pattern.durationS * 1000;
      const timesMs: number[] = [];
      for (let t = 0;;) {
        // Exponential gaps; 1 - random() is in (0, 1], so the logarithm is finite.
        t += (-Math.log(1 - random()) * 1000) / pattern.ratePerS;
        if (t >= end) break;
        timesMs.push(t);
      }
      return { originMs: START_MS, originLabel: "the start", fromMs: 0, toMs: end, timesMs };
    }
    case "retry-storm": {
      check(isWhole(pattern.clients, 1, 5000), `Clients must be a whole number from 1 to 5000; received ${pattern.clients}.`);
      check(
        isPositive(pattern.thinkMs, 3_600_000),
        `The time between a client's requests must be more than 0 ms and at most an hour; received ${pattern.thinkMs} ms.`,
      );
      check(
        isPositive(pattern.durationS, 86_400),
        `The duration must be more than 0 s and at most a day; received ${pattern.durationS} s.`,
      );
      check(isWhole(pattern.seed, 0, 2 ** 32 - 1), `The seed must be a whole number from 0 to 4294967295; received ${pattern.seed}.`);
      return { originMs: START_MS, originLabel: "the start", fromMs: 0, toMs: pattern.durationS * 1000 };
    }
    case "custom": {
      check(
        pattern.timesMs.length >= 1 && pattern.timesMs.length <= MAX_REQUESTS,
        `Give from 1 to ${MAX_REQUESTS} timestamps; received ${pattern.timesMs.length}.`,
      );
      for (const t of pattern.timesMs) {
        check(Number.isFinite(t) && t >= 0 && t <= 86_400_000 * 365, `Timestamps are milliseconds from 0 to a year; received ${t}.`);
      }
      const timesMs = [...pattern.timesMs].sort((a, b) => a - b);
      const last = timesMs[timesMs.length - 1]!;
      const first = timesMs[0]!;
      const margin = Math.max(100, (last - first) * 0.05);
      return { originMs: EPOCH_MS, originLabel: "a window boundary", fromMs: Math.max(0, first - margin), toMs: last + margin, timesMs };
    }
  }
}

/** Parses a custom list: numbers separated by commas, spaces or new lines. */
export function parseTimestamps(text: string): number[] {
  const parts = text.split(/[\s,;]+/).filter((p) => p !== "");
  const times = parts.map(Number);
  const bad = parts.find((_, i) => !Number.isFinite(times[i]));
  if (bad !== undefined) throw new ScenarioError(`"${bad}" is not a number; give milliseconds separated by commas, spaces or new lines.`);
  return times;
}

/** A min-heap of pending requests by time, then by client (so ties resolve the same way everywhere). */
class Queue {
  readonly #items: [number, number][] = [];
  get size(): number {
    return this.#items.length;
  }
  push(t: number, client: number): void {
    const items = this.#items;
    items.push([t, client]);
    for (let i = items.length - 1; i > 0;) {
      const parent = (i - 1) >> 1;
      if (!Queue.#before(items[i]!, items[parent]!)) break;
      [items[i], items[parent]] = [items[parent]!, items[i]!];
      i = parent;
    }
  }
  pop(): [number, number] {
    const items = this.#items;
    const top = items[0]!;
    const last = items.pop()!;
    if (items.length > 0) {
      items[0] = last;
      for (let i = 0;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < items.length && Queue.#before(items[l]!, items[m]!)) m = l;
        if (r < items.length && Queue.#before(items[r]!, items[m]!)) m = r;
        if (m === i) break;
        [items[i], items[m]] = [items[m]!, items[i]!];
        i = m;
      }
    }
    return top;
  }
  static #before(a: [number, number], b: [number, number]): boolean {
    return a[0] < b[0] || (a[0] === b[0] && a[1] < b[1]);
  }
}

/** Runs one algorithm over the scenario's traffic on simulated time. */
function runAlgorithm(kind: PolicyKind, scenario: Scenario, trace: Trace): AlgorithmRun {
  const policy = policyFor(kind, scenario.params);
  let nowMs = trace.originMs;
  const clock = (): number => nowMs;
  const shared = memoryStore();
  const limiters: RateLimiter[] = [];
  for (let i = 0; i < scenario.instances; i++) {
    limiters.push(createRateLimiter({ policy, store: scenario.separateStores === true ? memoryStore() : shared, clock }));
  }
  const requests: SimulatedRequest[] = [];
  const perInstance = limiters.map(() => ({ admitted: 0, denied: 0 }));
  /** One request at `t` ms after the origin, handled by the next instance in turn. */
  const send = (t: number): { allowed: boolean; retryAfterMs: number } => {
    nowMs = trace.originMs + t;
    const instance = requests.length % limiters.length;
    // The memory store answers synchronously, so `decide` returns the decision itself.
    const decision = limiters[instance]!.decide(KEY);
    if (decision instanceof Promise) throw new Error("the memory store answered asynchronously");
    requests.push({ t, instance, allowed: decision.allowed });
    const counts = perInstance[instance]!;
    if (decision.allowed) counts.admitted++;
    else counts.denied++;
    return decision;
  };

  if (trace.timesMs !== undefined) {
    for (const t of trace.timesMs) send(t);
  } else if (scenario.pattern.kind === "retry-storm") {
    const { clients, thinkMs, seed } = scenario.pattern;
    const random = seededRandom(seed);
    const queue = new Queue();
    for (let c = 0; c < clients; c++) queue.push(random() * thinkMs, c);
    while (queue.size > 0) {
      const [t, client] = queue.pop();
      if (t >= trace.toMs) break;
      if (requests.length >= MAX_REQUESTS) {
        throw new ScenarioError(`The storm made more than ${MAX_REQUESTS} requests; use fewer clients or a shorter duration.`);
      }
      const decision = send(t);
      // Retry-After is whole seconds, rounded up; a request that can never fit is not retried.
      const waitMs = decision.allowed ? thinkMs : Math.ceil(decision.retryAfterMs / 1000) * 1000;
      if (Number.isFinite(waitMs)) queue.push(t + waitMs, client);
    }
  }
  const admitted = perInstance.reduce((sum, c) => sum + c.admitted, 0);
  return {
    kind,
    label: ALGORITHM_LABELS[kind],
    policyName: policy.name,
    description: describeParams(kind, scenario.params),
    requests,
    admitted,
    denied: requests.length - admitted,
    perInstance,
  };
}

/** Runs every chosen algorithm over the same traffic. Throws ScenarioError (or core's FloodgateError) on bad input. */
export function simulate(scenario: Scenario): SimulationResult {
  check(
    isWhole(scenario.instances, 1, MAX_INSTANCES),
    `Instances must be a whole number from 1 to ${MAX_INSTANCES}; received ${scenario.instances}.`,
  );
  const trace = traceOf(scenario.pattern, scenario.params);
  const kinds = scenario.algorithms ?? ALGORITHMS;
  return {
    scenario,
    originMs: trace.originMs,
    originLabel: trace.originLabel,
    fromMs: trace.fromMs,
    toMs: trace.toMs,
    runs: kinds.map((kind) => runAlgorithm(kind, scenario, trace)),
  };
}
