/**
 * THE store contract suite: every RateLimitStore (memory, Upstash through the bridge, ioredis,
 * node-redis, ioredis Cluster) runs these same tests. Time is injected (`clock: "local"` stores)
 * wherever a test depends on it; tests on server time use windows of an hour, so the
 * milliseconds the test takes cannot change a decision.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { example, KINDS as REGISTERED_KINDS, type RateKind, retentionMs } from "../support/kinds.ts";
import {
  createRateLimiter,
  fixedWindow,
  type Policy,
  type PolicyKind,
  type RateLimiter,
  type RateLimitStore,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from "../../packages/core/src/index.ts";
import { reservationContract } from "./reservation-contract.ts";

export interface StoreHarness {
  /** A fresh store: on the server's clock, or on the time the limiter passes. Memory stores ignore the mode. */
  store(clock: "server" | "local"): RateLimitStore;
  /** PTTL (ms) of raw Redis keys (-2 missing, -1 no TTL); absent for stores without TTLs. */
  pttl?(keys: string[]): Promise<number[]>;
  /** Stops whatever the harness started. */
  close(): Promise<void>;
}

let prefixCounter = 0;
/** A prefix no other test uses, so tests share a server without interfering. */
export function uniquePrefix(): string {
  return `t${process.pid}x${Date.now().toString(36)}x${++prefixCounter}:`;
}

/** Every kind in the registry: each runs the whole contract. */
export const KINDS: readonly RateKind[] = REGISTERED_KINDS;

/**
 * Waits out the next hour boundary when it is less than `marginMs` away. Tests on the server's
 * clock use windows of an hour, but windows are aligned: one test running across the boundary
 * sees a fixed window start afresh mid-test. Redis runs on this machine, on the same clock.
 * The margin stays under Bun's 5 s default timeout (the contract also runs there).
 */
export async function clearOfHourBoundary(marginMs = 3000): Promise<void> {
  const left = 3_600_000 - (Date.now() % 3_600_000);
  if (left < marginMs) await new Promise((resolve) => setTimeout(resolve, left + 50));
}

/** A policy of `kind` admitting `limit` per hour (a token bucket refilling its capacity per hour). */
export function hourly(kind: PolicyKind, limit: number, name?: string): Policy {
  return example(kind, limit, 3_600_000, name);
}

/** A window policy of `kind` with `limit` per `windowMs`, or a token bucket refilling `limit` per `windowMs`. */
export function windowed(kind: PolicyKind, limit: number, windowMs: number, name?: string, extra?: object): Policy {
  return example(kind, limit, windowMs, name, extra);
}

/** A limiter on injected time, and that time. */
interface Timed {
  limiter: RateLimiter;
  at(ms: number): void;
}

/**
 * Per kind, a refund arriving after the state moved on (a later window, later grants, later
 * entries), then what the kept admissions leave: exactly what the algorithm would hold had the
 * refunded request never been made. Every time is relative to T, the start of a 10 s window.
 * A kind added to the registry without a case fails to compile here.
 */
const LATE_REFUNDS: { readonly [K in RateKind]: { policy: () => Policy; run: (t: Timed) => Promise<void> } } = {
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
};

/** Longest TTL a key of this policy may need after a charge at any time. */
function maxTtlMs(policy: Policy): number {
  return retentionMs(policy);
}

export function storeContract(name: string, setup: () => Promise<StoreHarness>): void {
  describe(`store contract: ${name}`, () => {
    let h: StoreHarness;
    let server: RateLimitStore;
    let local: RateLimitStore;
    beforeAll(async () => {
      h = await setup();
      server = h.store("server");
      local = h.store("local");
    });
    beforeEach(() => clearOfHourBoundary());
    afterAll(async () => {
      await server?.dispose?.();
      await local?.dispose?.();
      await h?.close();
    });

    describe.each(KINDS)("%s", (kind) => {
      it("allows a first request and counts it", async () => {
        const limiter = createRateLimiter({ policy: hourly(kind, 5), store: server, prefix: uniquePrefix() });
        const d = await limiter.limit("alice");
        expect(d.allowed).toBe(true);
        expect(d.remaining).toBe(4);
        expect(d.retryAfterMs).toBe(0);
        expect(d.resetAt).toBeGreaterThan(Date.now() - 5000);
      });

      it("denies at N+1 with a finite retry-after", async () => {
        const limiter = createRateLimiter({ policy: hourly(kind, 5), store: server, prefix: uniquePrefix() });
        for (let i = 0; i < 5; i++) expect((await limiter.limit("bob")).allowed).toBe(true);
        const denied = await limiter.limit("bob");
        expect(denied.allowed).toBe(false);
        expect(denied.remaining).toBe(0);
        expect(denied.retryAfterMs).toBeGreaterThan(0);
        // Never beyond the time the state matters (two windows for the sliding counter, whose current count weighs on the next window).
        expect(denied.retryAfterMs).toBeLessThanOrEqual(maxTtlMs(hourly(kind, 5)));
        // Another identifier is untouched.
        expect((await limiter.limit("bobby")).remaining).toBe(4);
      });

      it("charges cost whole or not at all; a cost above the limit never fits", async () => {
        const limiter = createRateLimiter({ policy: hourly(kind, 5), store: server, prefix: uniquePrefix() });
        expect((await limiter.limit("c", { cost: 3 })).remaining).toBe(2);
        const tooMuch = await limiter.limit("c", { cost: 3 });
        expect(tooMuch.allowed).toBe(false);
        expect((await limiter.peek("c")).remaining).toBe(2);
        const exact = await limiter.limit("c", { cost: 2 });
        expect(exact.allowed).toBe(true);
        expect(exact.remaining).toBe(0);
        const never = await limiter.limit("fresh", { cost: 6 });
        expect(never.allowed).toBe(false);
        expect(never.retryAfterMs).toBe(Infinity);
        expect((await limiter.peek("fresh")).remaining).toBe(5);
      });

      it("peek reports without charging", async () => {
        const limiter = createRateLimiter({ policy: hourly(kind, 3), store: server, prefix: uniquePrefix() });
        const before = await limiter.peek("p");
        expect(before.allowed).toBe(true);
        expect(before.remaining).toBe(3);
        await limiter.limit("p");
        for (let i = 0; i < 3; i++) expect((await limiter.peek("p")).remaining).toBe(2);
        await limiter.limit("p", { cost: 2 });
        const after = await limiter.peek("p");
        expect(after.allowed).toBe(false);
        expect(after.remaining).toBe(0);
        expect(after.retryAfterMs).toBeGreaterThan(0);
      });

      it("refund gives units back, never beyond an empty state", async () => {
        const limiter = createRateLimiter({ policy: hourly(kind, 5), store: server, prefix: uniquePrefix() });
        await limiter.limit("r", { cost: 5 });
        expect((await limiter.limit("r")).allowed).toBe(false);
        await limiter.refund("r", { cost: 2 });
        expect((await limiter.peek("r")).remaining).toBe(2);
        expect((await limiter.limit("r", { cost: 2 })).allowed).toBe(true);
        await limiter.refund("r", { cost: 100 });
        expect((await limiter.peek("r")).remaining).toBe(5);
        expect((await limiter.limit("r", { cost: 5 })).allowed).toBe(true);
        expect((await limiter.limit("r")).allowed).toBe(false);
        // Refunding an identifier with no state creates none.
        await limiter.refund("nobody", { cost: 3 });
        expect((await limiter.peek("nobody")).remaining).toBe(5);
      });

      it("a refund into the charge right after it gives the request back", async () => {
        let now = 1_700_000_000_000;
        const limiter = createRateLimiter({ policy: windowed(kind, 3, 10_000), store: local, prefix: uniquePrefix(), clock: () => now });
        const first = await limiter.limit("k", { cost: 2 });
        expect(first.charge).toBeDefined();
        now += 1;
        // Part of it, through JSON, as a charge handed to another process would travel.
        await limiter.refund("k", { charge: JSON.parse(JSON.stringify(first.charge)), cost: 1 });
        expect((await limiter.peek("k")).remaining).toBe(2);
        expect((await limiter.limit("k", { cost: 2 })).allowed).toBe(true);
        // The whole of it: the cost defaults to the charge's.
        const whole = await limiter.limit("j", { cost: 3 });
        await limiter.refund("j", { charge: whole.charge });
        expect((await limiter.peek("j")).remaining).toBe(3);
        // Denials and peeks charge nothing, so carry no charge.
        expect((await limiter.limit("k")).charge).toBeUndefined();
        expect((await limiter.peek("k")).charge).toBeUndefined();
      });

      it("a refund into the charge on the store's own clock", async () => {
        const limiter = createRateLimiter({ policy: hourly(kind, 5), store: server, prefix: uniquePrefix() });
        const d = await limiter.limit("s", { cost: 3 });
        await limiter.limit("s");
        await limiter.refund("s", { charge: d.charge, cost: 2 });
        // The bucket's time moved on with the second grant: nothing to give back into the first.
        expect((await limiter.peek("s")).remaining).toBe(kind === "token-bucket" ? 1 : 3);
        const last = await limiter.limit("s");
        await limiter.refund("s", { charge: last.charge });
        expect((await limiter.peek("s")).remaining).toBe(kind === "token-bucket" ? 1 : 3);
      });

      it("a late refund gives back only into what the request was charged in", async () => {
        const start = 1_700_000_000_000; // a multiple of 10 s
        let now = start;
        const late = LATE_REFUNDS[kind];
        const limiter = createRateLimiter({ policy: late.policy(), store: local, prefix: uniquePrefix(), clock: () => now });
        await late.run({ limiter, at: (ms) => (now = start + ms) });
      });

      it("a denied request consumes nothing", async () => {
        const limiter = createRateLimiter({ policy: hourly(kind, 4), store: server, prefix: uniquePrefix() });
        await limiter.limit("d", { cost: 3 });
        for (let i = 0; i < 20; i++) expect((await limiter.limit("d", { cost: 2 })).allowed).toBe(false);
        const one = await limiter.limit("d");
        expect(one.allowed).toBe(true);
        expect(one.remaining).toBe(0);
      });

      it("a denied request consumes nothing: it is admitted exactly when retry-after says (injected time)", async () => {
        let now = 1_700_000_000_000;
        const policy = kind === "token-bucket" ? tokenBucket({ capacity: 3, refillRate: 2 }) : windowed(kind, 3, 10_000);
        const limiter = createRateLimiter({ policy, store: local, prefix: uniquePrefix(), clock: () => now });
        for (let i = 0; i < 3; i++) expect((await limiter.limit("k")).allowed).toBe(true);
        const denied = await limiter.limit("k");
        expect(denied.allowed).toBe(false);
        now += 1;
        for (let i = 0; i < 10; i++) expect((await limiter.limit("k")).allowed).toBe(false);
        now += denied.retryAfterMs - 2;
        expect((await limiter.limit("k")).allowed).toBe(false);
        now += 1;
        const admitted = await limiter.limit("k");
        expect(admitted.allowed).toBe(true);
      });

      it("a clock stepping backwards grants no extra quota", async () => {
        let now = 1_700_000_000_000 + 1234.5;
        const policy = windowed(kind, 3, 60_000);
        const limiter = createRateLimiter({ policy, store: local, prefix: uniquePrefix(), clock: () => now });
        for (let i = 0; i < 3; i++) expect((await limiter.limit("b")).allowed).toBe(true);
        now -= 30_000;
        const back = await limiter.limit("b");
        expect(back.allowed).toBe(false);
        expect(back.remaining).toBe(0);
        now -= 3_600_000;
        const further = await limiter.limit("b");
        expect(further.allowed).toBe(false);
        expect(further.remaining).toBe(0);
        expect((await limiter.peek("b")).allowed).toBe(false);
      });

      it("remaining stays >= 0 when a lowered limit reads state charged under a larger one (same prefix)", async () => {
        const prefix = uniquePrefix();
        const before = createRateLimiter({ policy: hourly(kind, 10), store: server, prefix });
        const after = createRateLimiter({ policy: hourly(kind, 4), store: server, prefix });
        expect((await before.limit("lowered", { cost: 10 })).allowed).toBe(true);
        const peeked = await after.peek("lowered");
        expect(peeked.allowed).toBe(false);
        expect(peeked.remaining).toBe(0);
        const denied = await after.limit("lowered");
        expect(denied.allowed).toBe(false);
        expect(denied.remaining).toBe(0);
        expect(denied.policies[0]!.remaining).toBe(0);
      });

      it("a key holding another kind's state (a limiter reconfigured under the same prefix) is read as empty", async () => {
        // Several fixed times (the stores' local clock): whether one kind's value could pass for
        // another's depends on the time, so each pair is tried at eight of them.
        for (const other of KINDS) {
          if (other === kind) continue;
          for (let k = 0; k < 8; k++) {
            const now = Date.now() + k * 3_700_123;
            const clock = (): number => now;
            const prefix = uniquePrefix();
            const before = createRateLimiter({ policy: hourly(other, 10), store: local, prefix, clock });
            for (const cost of [3, 4]) expect((await before.limit("switched", { cost })).allowed).toBe(true);
            const after = createRateLimiter({ policy: hourly(kind, 5), store: local, prefix, clock });
            const where = `${other}, then ${kind}, at +${k * 3_700_123} ms`;
            const peeked = await after.peek("switched");
            expect([peeked.allowed, peeked.remaining], `${where}: peek`).toEqual([true, 5]);
            const d = await after.limit("switched", { cost: 2 });
            expect([d.allowed, d.remaining], where).toEqual([true, 3]);
          }
        }
      });

      it("reset deletes exactly that identifier", async () => {
        const prefix = uniquePrefix();
        const limiter = createRateLimiter({ policy: hourly(kind, 2), store: server, prefix });
        const other = createRateLimiter({ policy: hourly(kind, 2), store: server, prefix: `${prefix}x` });
        const ids = ["user", "user:1", "user}", "user}:1", "user%7D", "us", "{user}", "user%"];
        for (const id of ids) {
          await limiter.limit(id, { cost: 2 });
          await other.limit(id, { cost: 2 });
        }
        await limiter.reset("user");
        expect((await limiter.peek("user")).remaining).toBe(2);
        expect((await limiter.limit("user")).allowed).toBe(true);
        for (const id of ids.slice(1)) expect((await limiter.peek(id)).remaining, id).toBe(0);
        for (const id of ids) expect((await other.peek(id)).remaining, id).toBe(0);
        await limiter.reset("user}");
        expect((await limiter.peek("user}")).remaining).toBe(2);
        expect((await limiter.peek("user%7D")).remaining).toBe(0);
        expect((await limiter.peek("user}:1")).remaining).toBe(0);
        // Resetting what does not exist is fine.
        await limiter.reset("never-seen");
      });

      it("identifiers with lone surrogates address only their own state (UTF-8 would turn them into U+FFFD)", async () => {
        const limiter = createRateLimiter({ policy: hourly(kind, 2), store: server, prefix: uniquePrefix() });
        const ids = ["victim\uFFFD", "victim\uD800", "victim\uDC00", "victim\uDC00\uD800", "victim%uD800", "victim\uFFFD\uFFFD"];
        await limiter.limit(ids[0]!, { cost: 2 });
        for (const id of ids.slice(1)) expect((await limiter.peek(id)).remaining, JSON.stringify(id)).toBe(2);
        await limiter.limit(ids[1]!, { cost: 2 });
        await limiter.reset(ids[0]!);
        expect((await limiter.peek(ids[1]!)).remaining).toBe(0);
        for (const id of [ids[0]!, ...ids.slice(2)]) expect((await limiter.peek(id)).remaining, JSON.stringify(id)).toBe(2);
        // A well-formed pair is just a character, as before.
        await limiter.limit("emoji\uD83D\uDE00", { cost: 2 });
        expect((await limiter.peek("emoji\u{1F600}")).remaining).toBe(0);
      });

      it("keys carry a TTL no longer than the algorithm needs", async () => {
        if (h.pttl === undefined) return;
        const prefix = uniquePrefix();
        const policy = hourly(kind, 5);
        const limiter = createRateLimiter({ policy, store: server, prefix });
        await limiter.limit("ttl-user", { cost: 2 });
        const [ttl] = await h.pttl([`${prefix}{ttl-user}`]);
        expect(ttl).toBeGreaterThan(0);
        expect(ttl).toBeLessThanOrEqual(maxTtlMs(policy));
        if (kind === "token-bucket") {
          // The bucket is full again after 2 tokens' worth of refill.
          expect(ttl).toBeLessThanOrEqual(2 * policy.intervalMs + 1);
          expect(ttl).toBeGreaterThan(2 * policy.intervalMs - 5_000);
        }
        if (kind === "sliding-log") expect(ttl).toBeGreaterThan(policy.windowMs - 5_000);
        await limiter.reset("ttl-user");
        expect(await h.pttl([`${prefix}{ttl-user}`])).toEqual([-2]);
      });
    });

    describe.each(KINDS)("%s: blocks and penalties", (kind) => {
      /** A limiter on injected time over `policy`. */
      const timed = (policy: Policy | Policy[]): Timed & { limiter: RateLimiter } => {
        let now = 1_700_000_000_000;
        const limiter = createRateLimiter({ policy, store: local, prefix: uniquePrefix(), clock: () => now });
        return { limiter, at: (ms) => (now = 1_700_000_000_000 + ms) };
      };

      it("a policy's block keeps the key denied after its first denial, whatever the algorithm says", async () => {
        const { limiter, at } = timed(windowed(kind, 2, 10_000, "p", { block: "1m" }));
        expect((await limiter.limit("k")).allowed).toBe(true);
        expect((await limiter.limit("k")).allowed).toBe(true);
        const denied = await limiter.limit("k");
        expect(denied.allowed).toBe(false);
        expect(denied.retryAfterMs).toBe(60_000);
        expect(denied.remaining).toBe(0);
        expect(denied.resetAt).toBeGreaterThanOrEqual(1_700_000_060_000);
        expect(denied.charge).toBeUndefined();
        at(30_000); // the algorithm alone would admit again
        const blocked = await limiter.limit("k");
        expect(blocked.allowed).toBe(false);
        expect(blocked.retryAfterMs).toBe(30_000); // a blocked request does not extend the block
        expect((await limiter.peek("k")).retryAfterMs).toBe(30_000);
        expect((await limiter.limit("other")).allowed).toBe(true);
        at(60_000);
        const after = await limiter.limit("k");
        expect(after.allowed).toBe(true);
        expect(after.remaining).toBe(1); // nothing was charged while blocked
      });

      it("a cost above the limit blocks too; reset lifts a block", async () => {
        const { limiter } = timed(windowed(kind, 2, 10_000, "p", { block: "1h" }));
        const never = await limiter.limit("k", { cost: 3 });
        expect(never.allowed).toBe(false);
        expect(never.retryAfterMs).toBe(Infinity);
        const blocked = await limiter.limit("k");
        expect(blocked.allowed).toBe(false);
        expect(blocked.retryAfterMs).toBe(3_600_000);
        await limiter.reset("k");
        expect((await limiter.limit("k")).remaining).toBe(1);
      });

      it("block() and unblock(): a manual ban on any policy set, the counters kept", async () => {
        const { limiter, at } = timed([windowed(kind, 5, 10_000, "a"), windowed("fixed-window", 9, 60_000, "b")]);
        await limiter.limit("k");
        await limiter.block("k", "20s");
        await limiter.block("fresh", 20_000);
        for (const key of ["k", "fresh"]) {
          const d = await limiter.limit(key);
          expect(d.allowed).toBe(false);
          expect(d.retryAfterMs).toBe(20_000);
          expect(d.policies.map((p) => [p.allowed, p.remaining])).toEqual([[false, 0], [false, 0]]);
        }
        await limiter.unblock("k");
        expect((await limiter.limit("k")).policies.map((p) => p.remaining)).toEqual([3, 7]);
        at(20_000);
        expect((await limiter.limit("fresh")).policies.map((p) => p.remaining)).toEqual([4, 8]);
      });

      it("penalty() charges unconditionally, saturating at full", async () => {
        const { limiter, at } = timed([windowed(kind, 5, 10_000, "a"), windowed("fixed-window", 20, 60_000, "b")]);
        await limiter.penalty("k", { cost: 3 });
        expect((await limiter.peek("k")).policies.map((p) => p.remaining)).toEqual([2, 17]);
        await limiter.penalty("k", { cost: 10 }); // 2 left in the first, 17 in the second
        const full = await limiter.peek("k");
        expect(full.allowed).toBe(false);
        expect(full.policies.map((p) => p.remaining)).toEqual([0, 7]);
        expect(full.retryAfterMs).toBeGreaterThan(0);
        await limiter.penalty("k"); // nothing left to take in the first: no error, no change there
        expect((await limiter.peek("k")).policies.map((p) => p.remaining)).toEqual([0, 6]);
        at(20_000); // the state recovers as the algorithm recovers it
        expect((await limiter.limit("k")).allowed).toBe(true);
      });

      it("a penalty brings on the block of a blocking policy at the next denial", async () => {
        const { limiter } = timed(windowed(kind, 3, 10_000, "p", { block: "5m" }));
        await limiter.penalty("k", { cost: 3 });
        expect((await limiter.limit("k")).retryAfterMs).toBe(300_000);
      });

      it("reservations and blocks: a denied reservation blocks the key, a blocked key reserves nothing", async () => {
        const { limiter, at } = timed([windowed(kind, 2, 10_000, "p", { block: "1m" }), windowed("fixed-window", 50, 3_600_000, "h")]);
        const first = await limiter.reserve("k", { estimate: 2 });
        expect(first.decision.allowed).toBe(true);
        const denied = await limiter.reserve("k");
        expect(denied.decision.allowed).toBe(false);
        expect(denied.decision.retryAfterMs).toBe(60_000);
        expect(await denied.settle(5)).toBe(false); // a denial reserved nothing to settle
        await first.cancel(); // the units come back, the block stays
        at(30_000);
        const blocked = await limiter.reserve("k");
        expect(blocked.decision.allowed).toBe(false);
        expect(blocked.decision.retryAfterMs).toBe(30_000);
        at(60_000);
        const after = await limiter.reserve("k");
        expect(after.decision.allowed).toBe(true);
        // Nothing was charged by the denials: the cancelled 2 came back, only this 1 is held.
        expect(after.decision.policies.map((p) => p.remaining)).toEqual([1, 49]);
      });
    });

    describe("several policies", () => {
      it("one of every kind: admitted together, denied together", async () => {
        const policies = KINDS.map((kind, i) => hourly(kind, 3 + i, `k${i}`));
        const limiter = createRateLimiter({ policy: policies, store: server, prefix: uniquePrefix() });
        for (let n = 0; n < 3; n++) expect((await limiter.limit("all")).allowed).toBe(true);
        const denied = await limiter.limit("all");
        expect(denied.allowed).toBe(false);
        expect(denied.policy).toBe("k0");
        expect((await limiter.peek("all")).policies.map((p) => p.remaining)).toEqual(KINDS.map((_, i) => i));
      });

      it("are checked atomically: a denial charges none of them", async () => {
        const prefix = uniquePrefix();
        const policies = [
          hourly("token-bucket", 3, "burst"),
          hourly("fixed-window", 10, "hourly"),
          hourly("sliding-log", 10, "log"),
          hourly("sliding-window", 10, "sw"),
        ];
        const limiter = createRateLimiter({ policy: policies, store: server, prefix });
        for (let i = 0; i < 3; i++) expect((await limiter.limit("m")).allowed).toBe(true);
        for (let i = 0; i < 5; i++) {
          const d = await limiter.limit("m");
          expect(d.allowed).toBe(false);
          expect(d.policy).toBe("burst");
        }
        const peeked = await limiter.peek("m");
        expect(peeked.policies.map((p) => p.remaining)).toEqual([0, 7, 7, 7]);
        expect(peeked.policies.map((p) => p.allowed)).toEqual([false, true, true, true]);
        await limiter.refund("m", { cost: 2 });
        const after = await limiter.limit("m", { cost: 2 });
        expect(after.allowed).toBe(true);
        expect(after.policies.map((p) => p.remaining)).toEqual([0, 7, 7, 7]);
        await limiter.reset("m");
        expect((await limiter.peek("m")).policies.map((p) => p.remaining)).toEqual([3, 10, 10, 10]);
        if (h.pttl) expect(await h.pttl([0, 1, 2, 3].map((i) => `${prefix}{m}:${i}`))).toEqual([-2, -2, -2, -2]);
      });

      it("a late refund goes into each policy's own charge, atomically", async () => {
        const start = 1_700_000_000_000;
        let now = start;
        const limiter = createRateLimiter({
          policy: [fixedWindow({ limit: 2, window: "10s", name: "w" }), slidingLog({ limit: 3, window: "1m", name: "log" })],
          store: local,
          prefix: uniquePrefix(),
          clock: () => now,
        });
        const early = await limiter.limit("m");
        expect(early.charge?.marks).toHaveLength(2);
        now = start + 10_000;
        await limiter.limit("m");
        await limiter.refund("m", { charge: early.charge });
        // The passed window gives nothing back; the log drops the early entry, not the newest.
        expect((await limiter.peek("m")).policies.map((p) => p.remaining)).toEqual([1, 2]);
        now = start + 60_500;
        expect((await limiter.peek("m")).policies.map((p) => p.remaining)).toEqual([2, 2]);
      });

      it("report every policy's figures and bind on the longest wait", async () => {
        let now = 1_700_000_040_000; // a whole minute
        const limiter = createRateLimiter({
          policy: [fixedWindow({ limit: 2, window: "1s", name: "s" }), fixedWindow({ limit: 3, window: "1m", name: "m" })],
          store: local,
          prefix: uniquePrefix(),
          clock: () => now,
        });
        expect((await limiter.limit("x")).policy).toBe("s");
        await limiter.limit("x");
        const d = await limiter.limit("x");
        expect(d.allowed).toBe(false);
        expect(d.policy).toBe("s");
        now += 1000;
        expect((await limiter.limit("x")).allowed).toBe(true);
        const d2 = await limiter.limit("x");
        expect(d2.allowed).toBe(false);
        expect(d2.policy).toBe("m");
        expect(d2.retryAfterMs).toBe(59_000);
        expect(d2.policies.map((p) => [p.allowed, p.remaining])).toEqual([[true, 1], [false, 0]]);
      });

      it("keep one key per policy, each with its own TTL", async () => {
        if (h.pttl === undefined) return;
        const prefix = uniquePrefix();
        // Injected time, 2 s into a 10 s window: on the server's clock the 10 s key expires at the
        // next 10 s boundary, and one falling between the charge and the PTTL read made it -2.
        const now = 1_700_000_002_000;
        const limiter = createRateLimiter({
          policy: [fixedWindow({ limit: 5, window: "10s", name: "a" }), slidingWindow({ limit: 5, window: "1h", name: "b" })],
          store: local,
          prefix,
          clock: () => now,
        });
        await limiter.limit("ttl");
        const [a, b] = await h.pttl([`${prefix}{ttl}`, `${prefix}{ttl}:1`]);
        expect(a).toBeGreaterThan(0);
        expect(a).toBeLessThanOrEqual(10_000);
        expect(b).toBeGreaterThan(3_600_000);
        expect(b).toBeLessThanOrEqual(7_200_000);
      });
    });

    reservationContract(() => ({ server, local, harness: h }));
  });
}
