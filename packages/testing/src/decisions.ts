import { describe, expect, it } from "vitest";
import { createRateLimiter, tokenBucket } from "@floodgate/core";
import { LATE_REFUNDS } from "./late-refunds.ts";
import { type ContractContext, hourly, kindsOf, retentionMs, uniquePrefix, windowed } from "./support.ts";

/** Per kind: decisions, costs, peeks, refunds (into charges, late), denials that charge nothing, clocks stepping back, reset. */
export function decisionTests(ctx: ContractContext): void {
  describe.each(kindsOf(ctx))("%s", (kind) => {
    it("allows a first request and counts it", async () => {
      const limiter = createRateLimiter({ policy: hourly(kind, 5), store: ctx.server, prefix: uniquePrefix() });
      const d = await limiter.limit("alice");
      expect(d.allowed).toBe(true);
      expect(d.remaining).toBe(4);
      expect(d.retryAfterMs).toBe(0);
      expect(d.resetAt).toBeGreaterThan(Date.now() - 5000);
    });

    it("denies at N+1 with a finite retry-after", async () => {
      const limiter = createRateLimiter({ policy: hourly(kind, 5), store: ctx.server, prefix: uniquePrefix() });
      for (let i = 0; i < 5; i++) expect((await limiter.limit("bob")).allowed).toBe(true);
      const denied = await limiter.limit("bob");
      expect(denied.allowed).toBe(false);
      expect(denied.remaining).toBe(0);
      expect(denied.retryAfterMs).toBeGreaterThan(0);
      // Never beyond the time the state matters (two windows for the sliding counter, whose current count weighs on the next window).
      expect(denied.retryAfterMs).toBeLessThanOrEqual(retentionMs(hourly(kind, 5)));
      // Another identifier is untouched.
      expect((await limiter.limit("bobby")).remaining).toBe(4);
    });

    it("charges cost whole or not at all; a cost above the limit never fits", async () => {
      const limiter = createRateLimiter({ policy: hourly(kind, 5), store: ctx.server, prefix: uniquePrefix() });
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
      const limiter = createRateLimiter({ policy: hourly(kind, 3), store: ctx.server, prefix: uniquePrefix() });
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
      const limiter = createRateLimiter({ policy: hourly(kind, 5), store: ctx.server, prefix: uniquePrefix() });
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
      const limiter = createRateLimiter({ policy: windowed(kind, 3, 10_000), store: ctx.local, prefix: uniquePrefix(), clock: () => now });
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
      const limiter = createRateLimiter({ policy: hourly(kind, 5), store: ctx.server, prefix: uniquePrefix() });
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
      if (late === undefined) {
        throw new Error(`the contract suite has no late-refund case for the kind "${kind}": add one to late-refunds.ts`);
      }
      const limiter = createRateLimiter({ policy: late.policy(), store: ctx.local, prefix: uniquePrefix(), clock: () => now });
      await late.run({ limiter, at: (ms) => (now = start + ms) });
    });

    it("a denied request consumes nothing", async () => {
      const limiter = createRateLimiter({ policy: hourly(kind, 4), store: ctx.server, prefix: uniquePrefix() });
      await limiter.limit("d", { cost: 3 });
      for (let i = 0; i < 20; i++) expect((await limiter.limit("d", { cost: 2 })).allowed).toBe(false);
      const one = await limiter.limit("d");
      expect(one.allowed).toBe(true);
      expect(one.remaining).toBe(0);
    });

    it("a denied request consumes nothing: it is admitted exactly when retry-after says (injected time)", async () => {
      let now = 1_700_000_000_000;
      const policy = kind === "token-bucket" ? tokenBucket({ capacity: 3, refillRate: 2 }) : windowed(kind, 3, 10_000);
      const limiter = createRateLimiter({ policy, store: ctx.local, prefix: uniquePrefix(), clock: () => now });
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
      const limiter = createRateLimiter({ policy, store: ctx.local, prefix: uniquePrefix(), clock: () => now });
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
      const before = createRateLimiter({ policy: hourly(kind, 10), store: ctx.server, prefix });
      const after = createRateLimiter({ policy: hourly(kind, 4), store: ctx.server, prefix });
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
      for (const other of kindsOf(ctx)) {
        if (other === kind) continue;
        for (let k = 0; k < 8; k++) {
          const now = Date.now() + k * 3_700_123;
          const clock = (): number => now;
          const prefix = uniquePrefix();
          const before = createRateLimiter({ policy: hourly(other, 10), store: ctx.local, prefix, clock });
          for (const cost of [3, 4]) expect((await before.limit("switched", { cost })).allowed).toBe(true);
          const after = createRateLimiter({ policy: hourly(kind, 5), store: ctx.local, prefix, clock });
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
      const limiter = createRateLimiter({ policy: hourly(kind, 2), store: ctx.server, prefix });
      const other = createRateLimiter({ policy: hourly(kind, 2), store: ctx.server, prefix: `${prefix}x` });
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
      const limiter = createRateLimiter({ policy: hourly(kind, 2), store: ctx.server, prefix: uniquePrefix() });
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
  });
}
