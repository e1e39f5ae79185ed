/**
 * The two seed scenarios, run on injected time. `npm run demo` prints them; the test suite
 * asserts the same numbers.
 */
import { createRateLimiter, fixedWindow, type Policy, slidingLog, slidingWindow, tokenBucket } from "../packages/core/src/index.ts";

/** 2026-01-01T00:00:00Z: a multiple of one minute, so windows align with it. */
export const EPOCH = 1_767_225_600_000;

export interface Contender {
  label: string;
  policy: Policy;
}

/** Scenario 1's contenders: 100 per 60 s, and a bucket of 100 refilled at 100 per minute. */
export const boundaryContenders: Contender[] = [
  { label: "fixed window (100 / 60 s)", policy: fixedWindow({ limit: 100, window: "60s" }) },
  { label: "sliding window counter (100 / 60 s)", policy: slidingWindow({ limit: 100, window: "60s" }) },
  { label: "sliding log (100 / 60 s)", policy: slidingLog({ limit: 100, window: "60s" }) },
  { label: "token bucket (100, 100/60 per s)", policy: tokenBucket({ capacity: 100, refillRate: 100 / 60 }) },
];

/** Scenario 2's contenders: a bucket of 100 refilled at 10/s, and windows with the same long-run rate. */
export const steadyContenders: Contender[] = [
  { label: "fixed window (100 / 10 s)", policy: fixedWindow({ limit: 100, window: "10s" }) },
  { label: "sliding window counter (100 / 10 s)", policy: slidingWindow({ limit: 100, window: "10s" }) },
  { label: "sliding log (100 / 10 s)", policy: slidingLog({ limit: 100, window: "10s" }) },
  { label: "token bucket (100, 10 per s)", policy: tokenBucket({ capacity: 100, refillRate: 10 }) },
];

export interface BoundaryResult {
  lastSecond: number;
  firstSecond: number;
  total: number;
}

/**
 * Scenario 1 (boundary burst): 100 requests spread over the last second of a minute-aligned
 * window, then 100 over the first second of the next.
 */
export async function boundaryBurst(policy: Policy): Promise<BoundaryResult> {
  let now = EPOCH;
  const limiter = createRateLimiter({ policy, clock: () => now });
  const windowEnd = EPOCH + 60_000;
  let lastSecond = 0;
  let firstSecond = 0;
  for (let i = 0; i < 100; i++) {
    now = windowEnd - 1000 + i * 10;
    if ((await limiter.limit("client")).allowed) lastSecond++;
  }
  for (let i = 0; i < 100; i++) {
    now = windowEnd + i * 10;
    if ((await limiter.limit("client")).allowed) firstSecond++;
  }
  return { lastSecond, firstSecond, total: lastSecond + firstSecond };
}

export interface SteadyResult {
  burst: number;
  /** Admitted in each of the following seconds, at 50 attempts per second. */
  perSecond: number[];
}

/** Scenario 2 (burst then steady): 150 requests at once, then 50 per second for `seconds`. */
export async function burstThenSteady(policy: Policy, seconds = 12): Promise<SteadyResult> {
  let now = EPOCH + 30_000;
  const limiter = createRateLimiter({ policy, clock: () => now });
  let burst = 0;
  for (let i = 0; i < 150; i++) if ((await limiter.limit("client")).allowed) burst++;
  const perSecond: number[] = [];
  for (let s = 0; s < seconds; s++) {
    let admitted = 0;
    for (let i = 1; i <= 50; i++) {
      now = EPOCH + 30_000 + s * 1000 + i * 20;
      if ((await limiter.limit("client")).allowed) admitted++;
    }
    perSecond.push(admitted);
  }
  return { burst, perSecond };
}
