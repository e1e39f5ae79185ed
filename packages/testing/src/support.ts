import { createRateLimiter, type Policy, type PolicyKind, type RateLimiter, type RateLimitStore } from "@floodgate/core";
import { ALGORITHMS, POLICY_KINDS } from "@floodgate/core/store";
import * as core from "@floodgate/core";

/*
 * What every part of the contract suite shares: the harness a store author writes, the switches
 * for what a store does not implement, and policies made per kind from the registry.
 */

/** What a store author hands {@link storeContract}: fresh stores of theirs, and a way to clean up. */
export interface StoreHarness {
  /**
   * A fresh store: on its own clock (`"server"`, when it has one: the suite then uses windows of
   * an hour), or on the time the limiter passes (`"local"`: the suite injects time). A store
   * without a clock of its own ignores the mode.
   */
  store(clock: "server" | "local"): RateLimitStore;
  /** Stops whatever the harness started. */
  close(): Promise<void>;
}

/** What a store does not implement: each switch leaves out the tests of that capability. */
export interface StoreContractOptions {
  /** The store has no `reserve` and `settle` (limiters over it cannot `reserve()`). */
  readonly reservations?: false;
  /** The store has no `lease` (leased limiters over it decide exactly). */
  readonly leases?: false;
  /** The store has no `block`, `unblock` and `penalty`. */
  readonly blocks?: false;
  /**
   * Concurrent clients: how many store instances (`harness.store("server")` each) race on one key
   * in the concurrency tests (default 4; `false` leaves them out, for a store whose instances
   * share nothing, like the memory store).
   */
  readonly clients?: number | false;
  /**
   * The kinds the store decides, when not every kind (its `kinds`): the suite runs those, and
   * checks that a limiter over another kind is refused at creation.
   */
  readonly kinds?: readonly PolicyKind[];
}

/** The stores of a running suite, set once its `beforeAll` has run. */
export interface ContractContext {
  /** The harness's store on its own clock. */
  server: RateLimitStore;
  /** The harness's store on the limiter's (injected) time. */
  local: RateLimitStore;
  /** The harness `setup` made. */
  harness: StoreHarness;
  /** The switches the suite was called with. */
  readonly options: StoreContractOptions;
}

let prefixCounter = 0;
/** A prefix no other test uses, so tests share a server without interfering. */
export function uniquePrefix(): string {
  const pid = (globalThis as { process?: { pid?: number } }).process?.pid ?? Math.floor(Math.random() * 1e6);
  return `t${pid}x${Date.now().toString(36)}x${++prefixCounter}:`;
}

/** The kinds that count cost units (every registered kind but those that hold units in flight), in the registry's order. */
export const KINDS: readonly PolicyKind[] = POLICY_KINDS.filter((k) => !ALGORITHMS[k].traits.holdsUnits);

/** Those of `kinds` (default {@link KINDS}) the suite's store decides. */
export const kindsOf = (ctx: ContractContext, kinds: readonly PolicyKind[] = KINDS): readonly PolicyKind[] =>
  ctx.options.kinds === undefined ? kinds : kinds.filter((k) => ctx.options.kinds!.includes(k));

/**
 * The kinds of {@link KINDS} whose policies take any window (a calendar window's periods are
 * local days, weeks or months): the tests that move time by seconds to see a window pass.
 */
export const WINDOWED_KINDS: readonly PolicyKind[] = KINDS.filter((k) => example(k, 2, 10_000).windowMs === 10_000);

/** A policy of `kind` admitting `limit` per `windowMs` (a bucket of `limit` refilled over `windowMs`), from the factory the package exports for it. */
export function example(kind: PolicyKind, limit: number, windowMs: number, name?: string, extra?: object): Policy {
  const definition = ALGORITHMS[kind];
  const factory = (core as unknown as Record<string, unknown>)[definition.factoryName];
  if (typeof factory !== "function") throw new Error(`${kind}: @floodgate/core exports no ${definition.factoryName}()`);
  return (factory as (options: object) => Policy)({ ...definition.exampleOptions(limit, windowMs, name), ...extra });
}

/** The longest a key's state matters after a charge (the most its TTL needs to be). */
export const retentionMs = (policy: Policy): number => ALGORITHMS[policy.kind].retentionMs(policy);

/**
 * Waits out the next hour boundary when it is less than `marginMs` away. Tests on the store's
 * clock use windows of an hour, but windows are aligned: one test running across the boundary
 * sees a fixed window start afresh mid-test. The margin stays under Bun's 5 s default timeout.
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
export interface Timed {
  /** A limiter on injected time. */
  limiter: RateLimiter;
  /** Sets its time to `ms` after the start. */
  at(ms: number): void;
}

/** A limiter over `store` on injected time (starting at a whole minute), and a way to move it. */
export function timedLimiter(store: RateLimitStore, policy: Policy | Policy[]): Timed {
  let now = 1_700_000_000_000;
  const limiter = createRateLimiter({ policy, store, prefix: uniquePrefix(), clock: () => now });
  return { limiter, at: (ms) => (now = 1_700_000_000_000 + ms) };
}
