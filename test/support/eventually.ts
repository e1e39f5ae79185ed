/**
 * Behaviour, not latency: `npm test` asserts what a system ends up doing, on a machine that may
 * be loaded far beyond what a production host sees. These helpers wait (bounded) for a state to
 * be reached instead of asserting it after a fixed sleep; latency bounds live in test/timing.
 */

/** Reads `read()` every `everyMs` until `done(value)` holds or `withinMs` passed; returns the last value read. */
export async function eventually<T>(
  read: () => Promise<T> | T,
  done: (value: T) => boolean,
  { withinMs = 15_000, everyMs = 50 }: { withinMs?: number; everyMs?: number } = {},
): Promise<T> {
  const until = Date.now() + withinMs;
  for (;;) {
    const value = await read();
    if (done(value) || Date.now() > until) return value;
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}

/** Resolves once `probe()` resolves (the store answers again), or rejects with its last error after `withinMs`. */
export async function answers(probe: () => Promise<unknown>, withinMs = 30_000): Promise<void> {
  const until = Date.now() + withinMs;
  for (;;) {
    try {
      await probe();
      return;
    } catch (error) {
      if (Date.now() > until) throw error;
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
