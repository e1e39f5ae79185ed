import { describeValue, FloodgateError } from "../errors.ts";

/** What to do when the store fails, times out, or its circuit is open. */
export type StoreErrorAction = "allow" | "deny" | "fallback";

/** Options of the circuit breaker that stops calling a failing store. */
export interface CircuitBreakerOptions {
  /** Consecutive failures (errors or timeouts) that open the circuit (default 5). */
  failures?: number;
  /** How long the circuit stays open, in ms (default 30,000); then one call probes the store. */
  cooldownMs?: number;
}

/** Counts consecutive store failures; while open, the store is not called at all. */
export class CircuitBreaker {
  #failures = 0;
  #openUntil = 0;

  constructor(readonly threshold: number, readonly cooldownMs: number) {}

  /** Ms left open at `nowMs`, or 0 when the store may be called. */
  openFor(nowMs: number): number {
    return this.#openUntil > nowMs ? this.#openUntil - nowMs : 0;
  }

  /**
   * Before a store call: ms left open (do not call), or 0 (call). After the cool-down, the first
   * call is the one probe: the circuit stays open to the others until it settles (or, should it
   * never settle, for another cool-down).
   */
  admit(nowMs: number): number {
    const open = this.openFor(nowMs);
    if (open === 0 && this.#failures >= this.threshold) this.#openUntil = nowMs + this.cooldownMs;
    return open;
  }

  success(): void {
    this.#failures = 0;
    this.#openUntil = 0;
  }

  failure(nowMs: number): void {
    // After the cool-down, the next call is a probe: one more failure reopens at once.
    if (++this.#failures >= this.threshold) this.#openUntil = nowMs + this.cooldownMs;
  }
}

/**
 * Waits at most `timeoutMs` for `promise`, then rejects with `STORE_TIMEOUT` and stops waiting:
 * the late result is dropped and a late rejection is absorbed (never unhandled).
 */
export function withTimeout<T>(promise: Promise<T>, timeoutMs: number, storeName: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new FloodgateError("STORE_TIMEOUT", `The ${storeName} store did not answer within ${timeoutMs} ms; the call was abandoned.`)),
      timeoutMs,
    );
    promise.then(
      (value) => { clearTimeout(timer); resolve(value); },
      (error: unknown) => { clearTimeout(timer); reject(error); },
    );
  });
}

/** An error's message; anything else described (`String()` throws for an object without a prototype). */
export const errorText = (error: unknown): string => (error instanceof Error ? error.message : describeValue(error));

/** Wraps anything a store threw as a `FloodgateError` with code `STORE_ERROR` (keeping the cause). */
export function toStoreError(error: unknown, storeName: string): FloodgateError {
  // STORE_TIMEOUT, STORE_UNAVAILABLE or STORE_ERROR already.
  if (error instanceof FloodgateError && error.code.startsWith("STORE_")) return error;
  return new FloodgateError("STORE_ERROR", `The ${storeName} store failed: ${errorText(error)}`, { cause: error });
}
