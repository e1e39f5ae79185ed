/**
 * The kinds of policy, from the registry, for tests that run once per kind: adding a kind to
 * packages/core/src/algorithms/registry.ts puts it through every such test.
 */
import { ALGORITHMS, POLICY_KINDS, type PolicyKind } from "../../packages/core/src/algorithms/registry.ts";
import * as core from "../../packages/core/src/index.ts";
import type { Policy } from "../../packages/core/src/index.ts";

/**
 * The kinds that count cost units (every registered kind but concurrency, in the registry's
 * order): the suites written for `limit()` and cost run once per kind of these. A concurrency
 * policy holds one unit per reservation whatever the cost, and `limit()` refuses it; its own
 * suites (test/core/reservations.test.ts, test/stores/store-contract.ts "reservations", the
 * property and process tests) cover it.
 */
export type RateKind = Exclude<PolicyKind, "concurrency">;
export const KINDS: readonly RateKind[] = POLICY_KINDS.filter((k): k is RateKind => k !== "concurrency");

/**
 * The kinds of {@link KINDS} whose policies take any window (a calendar window's periods are
 * local days, weeks or months): the tests that need a window of their choosing.
 */
export const WINDOWED_KINDS: readonly RateKind[] = KINDS.filter((k) => example(k, 2, 10_000).windowMs === 10_000);

/**
 * The kinds the SQL stores (PostgreSQL, MySQL) decide: every kind but the calendar window, whose
 * periods need a time-zone calendar their procedures do not have (they refuse it through `kinds`).
 */
export const SQL_KINDS: readonly PolicyKind[] = POLICY_KINDS.filter((k) => k !== "calendar-window");
/** {@link KINDS} the SQL stores decide. */
export const SQL_RATE_KINDS: readonly RateKind[] = KINDS.filter((k) => SQL_KINDS.includes(k));

/**
 * A policy of `kind` admitting `limit` per `windowMs` (a bucket of `limit` refilled over
 * `windowMs`), built with the factory the package exports for it.
 */
export function example(kind: PolicyKind, limit: number, windowMs: number, name?: string, extra?: object): Policy {
  const definition = ALGORITHMS[kind];
  const factory = (core as unknown as Record<string, unknown>)[definition.factoryName];
  if (typeof factory !== "function") throw new Error(`${kind}: @floodgate/core exports no ${definition.factoryName}()`);
  return (factory as (options: object) => Policy)({ ...definition.exampleOptions(limit, windowMs, name), ...extra });
}

/** The longest a key's state matters after a charge (the most its TTL needs to be). */
export function retentionMs(policy: Policy): number {
  return ALGORITHMS[policy.kind].retentionMs(policy);
}
