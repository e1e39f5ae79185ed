/**
 * Reservations under random interleavings: reserve, settle, cancel, settle again (a client's
 * retry, from this limiter or another one of the same policies), and time passing beyond ttls and
 * concurrency timeouts, across two keys and several policy sets, on the memory store, the
 * compare-and-set store over evaluateState, and Redis (the Lua scripts, on injected time). After
 * every step, what each policy holds is exactly the settled truth: the actual cost of every
 * settled reservation plus the estimate of every one never settled (expired ones included), and
 * for a concurrency policy, the reservations neither settled nor past its timeout. A denial
 * reserves nothing.
 */
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  concurrency,
  createRateLimiter,
  fixedWindow,
  memoryStore,
  type Policy,
  type RateLimitStore,
  type Reservation,
  slidingLog,
  slidingWindow,
} from "../../packages/core/src/index.ts";
import { kvStore } from "../../examples/custom-store/kv-store.ts";
import { VersionedMap } from "../../examples/custom-store/versioned-map.ts";
import { uniquePrefix } from "../stores/store-contract.ts";
import { ioredisHarness, type RedisHarness } from "./harness.ts";

const T0 = 1_767_225_600_000; // an hour boundary: every trace stays within one hour
const LIMIT = 100_000;
const HELD = 3;
const TIMEOUT_MS = 600_000;
const TTL_MS = 300_000;

/** Policy sets: rate kinds that keep exact counts within one hour, with and without a concurrency limit. */
const SETS: readonly (() => Policy[])[] = [
  () => [fixedWindow({ limit: LIMIT, window: "1h", name: "fw" })],
  () => [concurrency({ limit: HELD, timeout: TIMEOUT_MS, name: "held" }), fixedWindow({ limit: LIMIT, window: "1h", name: "fw" })],
  () => [slidingWindow({ limit: LIMIT, window: "1h", name: "sw" }), concurrency({ limit: HELD, timeout: TIMEOUT_MS, name: "held" })],
  () => [slidingLog({ limit: LIMIT, window: "1h", name: "sl" }), fixedWindow({ limit: LIMIT, window: "1h", name: "fw" })],
  () => [concurrency({ limit: HELD, timeout: TIMEOUT_MS, name: "held" })],
];

type Op =
  | { t: "reserve"; key: string; estimate: number; dt: number }
  | { t: "settle"; which: number; actual: number; dt: number; via: "handle" | "other" }
  | { t: "cancel"; which: number; dt: number };

const keyArb = fc.constantFrom("a", "b");
const dtArb = fc.integer({ min: 0, max: 80 }).map((s) => s * 1000);
const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ t: fc.constant("reserve" as const), key: keyArb, estimate: fc.integer({ min: 1, max: 60 }), dt: dtArb }),
  fc.record({ t: fc.constant("reserve" as const), key: keyArb, estimate: fc.integer({ min: 1, max: 60 }), dt: fc.constant(0) }),
  fc.record({
    t: fc.constant("settle" as const),
    which: fc.nat(),
    actual: fc.integer({ min: 0, max: 150 }),
    dt: dtArb,
    via: fc.constantFrom("handle" as const, "other" as const),
  }),
  fc.record({ t: fc.constant("cancel" as const), which: fc.nat(), dt: dtArb }),
);

interface Held {
  key: string;
  reservation: Reservation;
  estimate: number;
  at: number;
  /** The actual cost once settled (0 when cancelled). */
  settled: number | undefined;
}

async function replay(store: RateLimitStore, policies: Policy[], ops: Op[]): Promise<void> {
  let now = T0;
  const prefix = uniquePrefix();
  const limiter = createRateLimiter({ policy: policies, store, prefix, clock: () => now, resilience: false });
  const other = createRateLimiter({ policy: policies, store, prefix, clock: () => now, resilience: false });
  const admitted: Held[] = [];
  const charged = (key: string): number => admitted.filter((h) => h.key === key).reduce((sum, h) => sum + (h.settled ?? h.estimate), 0);
  const inFlight = (key: string): number =>
    admitted.filter((h) => h.key === key && h.settled === undefined && now < h.at + TIMEOUT_MS).length;
  const limited = policies.some((p) => p.kind === "concurrency");

  for (const [step, op] of ops.entries()) {
    now += op.dt;
    const where = `step ${step}: ${JSON.stringify(op)} at +${(now - T0) / 1000} s`;
    if (op.t === "reserve") {
      const expected = !limited || inFlight(op.key) < HELD;
      const r = await limiter.reserve(op.key, { estimate: op.estimate, ttl: TTL_MS });
      expect(r.decision.allowed, where).toBe(expected);
      if (r.decision.allowed) admitted.push({ key: op.key, reservation: r, estimate: op.estimate, at: now, settled: undefined });
      else expect(await r.settle(op.estimate), where).toBe(false);
    } else if (admitted.length > 0) {
      const h = admitted[op.which % admitted.length]!;
      const actual = op.t === "cancel" ? 0 : op.actual;
      const live = h.settled === undefined && now < h.at + TTL_MS;
      const answer = op.t === "settle" && op.via === "other"
        ? await other.settle(h.key, { id: h.reservation.id, actual })
        : op.t === "cancel"
        ? await h.reservation.cancel()
        : await h.reservation.settle(actual);
      expect(answer, where).toBe(live);
      if (live) h.settled = actual;
    }
    for (const key of ["a", "b"]) {
      const figures = (await limiter.peek(key)).policies;
      for (const [p, policy] of policies.entries()) {
        const expected = policy.kind === "concurrency" ? HELD - inFlight(key) : LIMIT - charged(key);
        expect(figures[p]!.remaining, `${where}: ${policy.name} of ${key}`).toBe(expected);
      }
    }
  }
}

const STORES: readonly [string, () => RateLimitStore][] = [
  ["memory", () => memoryStore()],
  ["kv (evaluateState)", () => kvStore(new VersionedMap())],
];

describe.each(STORES)("reservation interleavings: %s", (_name, make) => {
  it("never leave the charged total different from the settled truth", async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 0, max: SETS.length - 1 }), fc.array(opArb, { minLength: 1, maxLength: 40 }), async (s, ops) => {
        await replay(make(), SETS[s]!(), ops);
      }),
      { numRuns: 150 },
    );
  });
});

describe("reservation interleavings: Redis (Lua, injected time)", () => {
  let h: RedisHarness;
  beforeAll(async () => {
    h = await ioredisHarness();
  });
  afterAll(async () => {
    await h?.close();
  });

  it("never leave the charged total different from the settled truth", async () => {
    const store = h.store("local", { denyCache: false });
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 0, max: SETS.length - 1 }), fc.array(opArb, { minLength: 1, maxLength: 40 }), async (s, ops) => {
        await replay(store, SETS[s]!(), ops);
      }),
      { numRuns: 60 },
    );
  });
});
