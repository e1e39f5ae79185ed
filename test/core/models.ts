/**
 * Reference models: each algorithm written from its textbook definition, as plainly as possible,
 * sharing no code with the engine. Times are integer milliseconds; a model answers whether a
 * request of `cost` fits now, and `retryAfterMs` is found by brute force (the first whole
 * millisecond at which the same request would fit), so an off-by-one in the engine's closed-form
 * answers cannot hide.
 */
import type { Policy, PolicyKind } from "../../packages/core/src/index.ts";

export interface ModelAnswer {
  allowed: boolean;
  remaining: number;
  retryAfterMs: number;
}

export interface Model {
  /** Whether `cost` fits at `now`, without charging. */
  fits(now: number, cost: number): boolean;
  /** Units left at `now` (whole units, never negative). */
  remaining(now: number): number;
  charge(now: number, cost: number): void;
}

/** Token bucket as credit in microseconds: one token is `intervalUs` of credit. */
export class TokenBucketModel implements Model {
  private readonly interval: number;
  private readonly full: number;
  private credit: number;
  private last = -Infinity;

  constructor(private readonly policy: Policy) {
    this.interval = Math.round(policy.intervalMs * 1000);
    this.full = policy.limit * this.interval;
    this.credit = this.full;
  }

  private creditAt(now: number): number {
    if (this.last === -Infinity) return this.full;
    return Math.min(this.full, this.credit + Math.max(0, now - this.last) * 1000);
  }

  fits(now: number, cost: number): boolean {
    return cost <= this.policy.limit && this.creditAt(now) >= cost * this.interval;
  }

  remaining(now: number): number {
    return Math.floor(this.creditAt(now) / this.interval);
  }

  charge(now: number, cost: number): void {
    this.credit = this.creditAt(now) - cost * this.interval;
    this.last = Math.max(this.last, now);
  }
}

/** Fixed window: a count per aligned window index. */
export class FixedWindowModel implements Model {
  private readonly counts = new Map<number, number>();
  constructor(private readonly policy: Policy) {}

  private count(now: number): number {
    return this.counts.get(Math.floor(now / this.policy.windowMs)) ?? 0;
  }

  fits(now: number, cost: number): boolean {
    return this.count(now) + cost <= this.policy.limit;
  }

  remaining(now: number): number {
    return this.policy.limit - this.count(now);
  }

  charge(now: number, cost: number): void {
    const index = Math.floor(now / this.policy.windowMs);
    this.counts.set(index, (this.counts.get(index) ?? 0) + cost);
  }
}

/** Sliding-window counter: previous window's count weighted by its overlap, exact in rationals. */
export class SlidingWindowModel implements Model {
  private readonly counts = new Map<number, number>();
  constructor(private readonly policy: Policy) {}

  /** The estimate times W, so comparisons stay in integers. */
  private scaledEstimate(now: number): number {
    const w = this.policy.windowMs;
    const index = Math.floor(now / w);
    const elapsed = now - index * w;
    return (this.counts.get(index - 1) ?? 0) * (w - elapsed) + (this.counts.get(index) ?? 0) * w;
  }

  fits(now: number, cost: number): boolean {
    return this.scaledEstimate(now) + cost * this.policy.windowMs <= this.policy.limit * this.policy.windowMs;
  }

  remaining(now: number): number {
    const w = this.policy.windowMs;
    return Math.max(0, Math.floor((this.policy.limit * w - this.scaledEstimate(now)) / w));
  }

  charge(now: number, cost: number): void {
    const index = Math.floor(now / this.policy.windowMs);
    this.counts.set(index, (this.counts.get(index) ?? 0) + cost);
  }
}

/** Sliding log: every admitted unit's timestamp; the window is (now - W, now]. */
export class SlidingLogModel implements Model {
  private readonly log: number[] = [];
  constructor(private readonly policy: Policy) {}

  private inWindow(now: number): number {
    return this.log.filter((t) => t > now - this.policy.windowMs).length;
  }

  fits(now: number, cost: number): boolean {
    return this.inWindow(now) + cost <= this.policy.limit;
  }

  remaining(now: number): number {
    return this.policy.limit - this.inWindow(now);
  }

  charge(now: number, cost: number): void {
    for (let i = 0; i < cost; i++) this.log.push(now);
  }
}

/**
 * Calendar window: a count per period, the period named by the local date (in the policy's time
 * zone, read with `toLocaleDateString`) of the instant: a day is its date; a week, the date of its
 * first day; a month, the billing cycle (year, month) its date falls in, a cycle starting on the
 * billing day or, in a month too short for it, on the month's last day. Boundaries are never
 * computed: they are wherever the name changes.
 */
export class CalendarWindowModel implements Model {
  /** Boundaries of local dates are at whole seconds: retry times are scanned per second. */
  readonly stepMs = 1000;
  private readonly counts = new Map<string, number>();
  private readonly format: Intl.DateTimeFormat;
  constructor(private readonly policy: Policy) {
    this.format = new Intl.DateTimeFormat("en-CA", {
      timeZone: policy.calendar!.timeZone,
      year: "numeric",
      month: "2-digit",
      day: "2-digit",
    });
  }

  /** The name of the period containing `now`. */
  name(now: number): string {
    const [y, m, d] = this.format.format(now).split("-").map(Number) as [number, number, number];
    const c = this.policy.calendar!;
    if (c.period === "day") return `${y}-${m}-${d}`;
    if (c.period === "week") {
      // Walk back to the week's first day, by whole calendar days.
      let date = new Date(Date.UTC(y, m - 1, d));
      while (date.getUTCDay() !== c.weekStart) date = new Date(date.getTime() - 86_400_000);
      return date.toISOString().slice(0, 10);
    }
    const lastDay = (yy: number, mm: number): number => new Date(Date.UTC(yy, mm, 0)).getUTCDate(); // mm 1-12
    const startIn = (yy: number, mm: number): number => Math.min(c.billingDay, lastDay(yy, mm));
    if (d >= startIn(y, m)) return `${y}-${m}`;
    return m === 1 ? `${y - 1}-12` : `${y}-${m - 1}`;
  }

  fits(now: number, cost: number): boolean {
    return (this.counts.get(this.name(now)) ?? 0) + cost <= this.policy.limit;
  }

  remaining(now: number): number {
    return this.policy.limit - (this.counts.get(this.name(now)) ?? 0);
  }

  charge(now: number, cost: number): void {
    const name = this.name(now);
    this.counts.set(name, (this.counts.get(name) ?? 0) + cost);
  }
}

/** One reference model per kind: a kind added to the registry without one fails to compile here. */
const MODELS: { readonly [K in PolicyKind]: new (policy: Policy) => Model } = {
  "token-bucket": TokenBucketModel,
  "fixed-window": FixedWindowModel,
  "sliding-window": SlidingWindowModel,
  "sliding-log": SlidingLogModel,
  "calendar-window": CalendarWindowModel,
  // Units held: one per admission whatever the cost, each for the timeout (settling is not modelled here).
  concurrency: class extends SlidingLogModel {
    override fits(now: number): boolean {
      return super.fits(now, 1);
    }
    override charge(now: number): void {
      super.charge(now, 1);
    }
  },
};

export function modelFor(policy: Policy): Model {
  return new MODELS[policy.kind](policy);
}

/** Several policies: admitted only when all fit; charged all or none. */
export class MultiModel {
  readonly models: Model[];
  constructor(readonly policies: readonly Policy[]) {
    this.models = policies.map(modelFor);
  }

  fits(now: number, cost: number): boolean {
    return this.models.every((m) => m.fits(now, cost));
  }

  /** The first whole ms at which the request fits: found by scanning, no formula. */
  retryAfterMs(now: number, cost: number): number {
    if (this.policies.some((p) => cost > p.limit)) return Infinity;
    // Models whose state changes only at whole seconds (calendar periods: boundaries at whole
    // minutes in every zone since 1972) are scanned per minute, then per second, then per ms.
    if (this.models.some((m) => "stepMs" in m)) {
      let wait = 0;
      while (!this.fits(now + wait, cost)) {
        wait += 60_000;
        if (wait > 40 * 86_400_000) throw new Error("model found no retry time");
      }
      if (wait === 0) return 0;
      wait -= 60_000; // does not fit here; fits within the next minute
      while (!this.fits(now + wait + 1000, cost)) wait += 1000;
      while (!this.fits(now + wait + 1, cost)) wait += 1;
      return wait + 1;
    }
    for (let wait = 0;; wait++) {
      if (this.fits(now + wait, cost)) return wait;
      if (wait > 10_000_000) throw new Error("model found no retry time");
    }
  }

  limit(now: number, cost: number, withRetry = true): { allowed: boolean; remaining: number[]; retryAfterMs: number } {
    const allowed = this.fits(now, cost);
    const retryAfterMs = allowed || !withRetry ? 0 : this.retryAfterMs(now, cost);
    if (allowed) { for (const m of this.models) m.charge(now, cost); }
    return { allowed, remaining: this.models.map((m) => m.remaining(now)), retryAfterMs };
  }
}
