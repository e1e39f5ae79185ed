/*
 * Waiting between attempts after losing a check-and-set race: "full jitter" (a random wait up to
 * an exponentially growing cap), so that callers who collided once spread out instead of
 * colliding again in step.
 */

/** First cap, ms: about one commit's time on a local database. */
const BASE_MS = 2;
/** Largest cap, ms. */
const MAX_MS = 100;

/** The wait before attempt `attempt + 1` (0-based `attempt` lost): random, below min(MAX, BASE × 2^attempt). */
export function backoffMs(attempt: number): number {
  return Math.random() * Math.min(MAX_MS, BASE_MS * 2 ** attempt);
}

/** Resolves after `ms`. */
export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
