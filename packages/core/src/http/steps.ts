// A computation written once for both a synchronous and an asynchronous store: a generator that
// yields each promise it must wait for, as an async function awaits it. Run by `runSteps`, it
// ends without a promise or a microtask when nothing it waited for was pending (the memory
// store, synchronous callbacks), and goes on asynchronously from the first promise it yields.

/** A generator that yields only the promises it waits for, and is sent back what each resolved to. */
export type Steps<T> = Generator<unknown, T, unknown>;

/** Runs `steps` to its end: its value, or a promise of it from the first promise it yields (a rejection is thrown back into it). */
export const runSteps = <T>(steps: Steps<T>, step = steps.next()): T | Promise<T> =>
  step.done
    ? step.value
    : Promise.resolve(step.value).then((value) => runSteps(steps, steps.next(value)), (error: unknown) =>
      runSteps(steps, steps.throw(error)));

/**
 * Hands what `run` returns to `then`: at once when it is not a promise, else once it resolves.
 * What either throws, or rejects with, and a rejection of what `then` returns, goes to `failed`
 * (for a callback-style framework: Express's `next`).
 */
export function thenOrNow<T>(run: () => T | Promise<T>, then: (value: T) => unknown, failed: (error: unknown) => void): void {
  try {
    const value = run();
    const answered = value instanceof Promise ? value.then(then) : then(value);
    if (answered !== undefined) Promise.resolve(answered).then(undefined, failed);
  } catch (error) {
    failed(error);
  }
}
