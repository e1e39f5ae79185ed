// The circuit breaker of the resilient store (../resilient-store.ts).

/** What {@link Breaker.admit} answers for the call that probes the store after a cool-down. */
export const PROBE = -1;

/**
 * Counts consecutive failures; opens after `threshold`, for a cool-down (doubling with each
 * failed probe up to `maxCooldownMs`, when that is above `cooldownMs`). While open, the store is
 * not called; after the cool-down exactly one call probes it, and its success closes the circuit
 * at once. Failures of calls sent before the circuit opened change nothing: a stall fails
 * hundreds at once, which is one outage.
 */
export class Breaker {
  #failures = 0;
  #open = false;
  #openUntil = 0;
  /** When the circuit opened, in the current outage (a failed probe's reopening keeps it). */
  #openedAtMs = 0;
  #nextCooldownMs: number;
  /** While a probe is in flight: until when it holds the circuit (a probe that never settles frees it then). */
  #probeUntil = 0;

  constructor(readonly threshold: number, readonly cooldownMs: number, readonly maxCooldownMs: number) {
    this.#nextCooldownMs = cooldownMs;
  }

  openFor(nowMs: number): number {
    if (!this.#open) return 0;
    const until = Math.max(this.#probeUntil, this.#openUntil);
    return until > nowMs ? until - nowMs : 0;
  }

  /** Before a call: ms left open (do not call), 0 (call), or PROBE (call: the one probe). */
  admit(nowMs: number): number {
    if (!this.#open) return 0;
    const open = this.openFor(nowMs);
    if (open > 0) return open;
    this.#probeUntil = nowMs + this.#nextCooldownMs;
    return PROBE;
  }

  /** A successful call: how long the circuit had been open when this closed it (the probe after a cool-down), else -1. */
  success(nowMs: number): number {
    const openMs = this.#open ? nowMs - this.#openedAtMs : -1;
    this.#failures = 0;
    this.#open = false;
    this.#probeUntil = 0;
    this.#nextCooldownMs = this.cooldownMs;
    return openMs;
  }

  /** A failed call; true when it opened the circuit (or reopened it: a failed probe). */
  failure(nowMs: number, probe: boolean): boolean {
    if (this.#open) {
      if (!probe) return false;
      this.#probeUntil = 0;
    } else if (++this.#failures < this.threshold) return false;
    else this.#openedAtMs = nowMs;
    this.#open = true;
    this.#openUntil = nowMs + this.#nextCooldownMs;
    this.#nextCooldownMs = Math.min(this.#nextCooldownMs * 2, this.maxCooldownMs);
    return true;
  }
}
