import { expect } from "vitest";
import { calendarWindow, fixedWindow, type Policy, slidingLog, slidingWindow, tokenBucket } from "@floodgate/core";
import type { Timed } from "./support.ts";

/**
 * Per kind, a refund arriving after the state moved on (a later window, later grants, later
 * entries), then what the kept admissions leave: exactly what the algorithm would hold had the
 * refunded request never been made. Every time is relative to T, the start of a 10 s window.
 * A kind added to the registry without a case fails the suite (see decisions.ts).
 */
export const LATE_REFUNDS: { readonly [kind: string]: { policy: () => Policy; run: (t: Timed) => Promise<void> } } = {
  "fixed-window": {
    // Charged in one window, refunded once the next is full: that window keeps its count.
    policy: () => fixedWindow({ limit: 2, window: "10s" }),
    async run({ limiter, at }) {
      const early = await limiter.limit("k");
      at(10_000);
      for (let i = 0; i < 2; i++) expect((await limiter.limit("k")).allowed).toBe(true);
      await limiter.refund("k", { charge: early.charge });
      expect((await limiter.peek("k")).remaining).toBe(0);
      expect((await limiter.limit("k")).allowed).toBe(false);
    },
  },
  "sliding-window": {
    // Charged in the previous window, refunded from the previous count, not the current one.
    policy: () => slidingWindow({ limit: 2, window: "10s" }),
    async run({ limiter, at }) {
      const early = await limiter.limit("k");
      expect((await limiter.limit("k")).allowed).toBe(true);
      at(15_000); // the previous window weighs half: 2 × 0.5 leaves room for one
      expect((await limiter.limit("k")).allowed).toBe(true);
      await limiter.refund("k", { charge: early.charge });
      // Without the early request: previous 1 × 0.5 + current 1 = 1.5, no room for another.
      expect((await limiter.limit("k")).allowed).toBe(false);
      at(20_000); // the window charged early no longer weighs: its refund would be a no-op
      expect((await limiter.peek("k")).remaining).toBe(1);
    },
  },
  "token-bucket": {
    // Refunded after the bucket refilled and was granted to again: no time goes back.
    policy: () => tokenBucket({ capacity: 2, refillRate: 1 }),
    async run({ limiter, at }) {
      const early = await limiter.limit("k");
      at(5_000);
      expect((await limiter.limit("k")).remaining).toBe(1);
      await limiter.refund("k", { charge: early.charge });
      expect((await limiter.peek("k")).remaining).toBe(1);
      expect((await limiter.limit("k")).allowed).toBe(true);
      expect((await limiter.limit("k")).allowed).toBe(false);
    },
  },
  "sliding-log": {
    // Refunded after a later entry: the request's own entry goes, not the newest.
    policy: () => slidingLog({ limit: 2, window: "10s" }),
    async run({ limiter, at }) {
      const early = await limiter.limit("k");
      at(1_000);
      expect((await limiter.limit("k")).allowed).toBe(true);
      at(2_000);
      expect((await limiter.limit("k")).allowed).toBe(false);
      await limiter.refund("k", { charge: early.charge });
      expect((await limiter.limit("k")).allowed).toBe(true);
      at(10_500); // the entries of +1 s and +2 s are both still in the window
      expect((await limiter.peek("k")).remaining).toBe(0);
      at(11_000);
      expect((await limiter.peek("k")).remaining).toBe(1);
    },
  },
  "calendar-window": {
    // Charged on one local day, refunded once the next day is full: that day keeps its count.
    policy: () => calendarWindow({ limit: 2, period: "day", timeZone: "Asia/Kathmandu" }),
    async run({ limiter, at }) {
      const early = await limiter.limit("k");
      at(86_400_000);
      for (let i = 0; i < 2; i++) expect((await limiter.limit("k")).allowed).toBe(true);
      await limiter.refund("k", { charge: early.charge });
      expect((await limiter.peek("k")).remaining).toBe(0);
      expect((await limiter.limit("k")).allowed).toBe(false);
    },
  },
};
