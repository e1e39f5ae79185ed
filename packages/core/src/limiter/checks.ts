import { traitsOf } from "../algorithms/algorithm.ts";
import { describeValue, FloodgateError } from "../errors.ts";
import { durationMs } from "../duration.ts";
import { isPolicies, POLICIES_ACCEPTED, type Policy } from "../policies.ts";
import { unwrapStore } from "../stores/resilient-store.ts";
import type { RateLimitStore } from "../stores/store.ts";
import { CLOCK_ACCEPTED, isFunction, isRecord, isStore, type OptionSpecs, prefixOf, STORE_ACCEPTED } from "../validation.ts";
import type { Charge } from "./types.ts";
import { WARN_AT } from "./warn-at.ts";

/*
 * The limiter's argument checks: every bad argument gets an error naming what was received and
 * what is accepted.
 */

/**
 * How long a reservation can be settled by default: ten minutes (600,000 ms), or a
 * concurrency policy's timeout when longer. Long enough for a streamed response that runs for
 * minutes; short enough that abandoned records do not pile up. After it, the reservation counts
 * as its estimate and settling it does nothing.
 */
export const DEFAULT_RESERVATION_TTL_MS = 600_000;

/** The longest `ttl` a reservation takes: one day. */
export const MAX_RESERVATION_TTL_MS = 86_400_000;

/** What createRateLimiter() accepts, option by option. */
export const OPTIONS: OptionSpecs = {
  policy: [isPolicies, `${POLICIES_ACCEPTED} with unique names`, 1],
  // `null` means the default store, as `undefined` does.
  store: [(v) => v === null || isStore(v), STORE_ACCEPTED],
  prefix: /* @__PURE__ */ prefixOf(128),
  clock: [isFunction, CLOCK_ACCEPTED],
  // Checked in detail by resilientStore().
  resilience: [
    (v) => v === false || isRecord(v),
    "false, or the options of resilientStore() ({ timeoutMs?, circuitBreaker?, maxInFlight?, logger?, onFailure? })",
  ],
  mode: [(v) => v === "exact" || v === "leased", '"exact" (default) or "leased"'],
  leaseMs: [
    (v) => typeof v === "number" && Number.isInteger(v) && v >= 100 && v <= 3_600_000,
    "a whole number of ms from 100 to 3600000 (default 5000)",
  ],
  shadowPolicy: [isPolicies, `${POLICIES_ACCEPTED}, named apart from the enforced ones`],
  warnAt: WARN_AT,
};

/** Throws when `store` (under any resilient wrapper) lacks `operation`, as a store written before it may. */
export function lacking(store: RateLimitStore, operation: "penalty" | "block" | "unblock"): void {
  if (typeof unwrapStore(store)[operation] === "function") return;
  throw new FloodgateError(
    "INVALID_ARGUMENT",
    `The ${store.name} store has no \`${operation}\` operation; penalties and blocks need a built-in store, or one that implements penalty, block and unblock (docs/writing-a-store.md).`,
  );
}

export function holdsError(policy: Policy): FloodgateError {
  return new FloodgateError(
    "INVALID_ARGUMENT",
    `limit() and decide() cannot take a concurrency policy ("${policy.name}"): nothing would release the unit it holds. Use limiter.reserve(key) and settle or cancel the reservation when the request ends, or a limiter without the concurrency policy.`,
  );
}

export function checkEstimate(estimate: unknown): number {
  if (typeof estimate !== "number" || !Number.isInteger(estimate) || estimate < 1 || estimate > Number.MAX_SAFE_INTEGER) {
    throw new FloodgateError(
      "INVALID_ARGUMENT",
      `Invalid estimate: received ${
        describeValue(estimate)
      }; expected a whole number from 1 to 9007199254740991 (Number.MAX_SAFE_INTEGER).`,
    );
  }
  return estimate;
}

export function checkTtl(ttl: unknown, policies: readonly Policy[]): number {
  const ms = durationMs(ttl);
  if (ms === undefined || ms > MAX_RESERVATION_TTL_MS) {
    throw new FloodgateError(
      "INVALID_ARGUMENT",
      `Invalid reservation ttl: received ${
        describeValue(ttl)
      }; expected a duration from 1 ms to one day: a whole number of milliseconds, or a string like "30s", "10m", "1h".`,
    );
  }
  // Past its ttl a reservation can no longer be settled, so a unit it holds would stay held until
  // the timeout: refused rather than raised, so that what the caller asked is what happens.
  const holding = policies.reduce<Policy | undefined>(
    (h, p) => (traitsOf(p).holdsUnits && p.windowMs > (h?.windowMs ?? 0) ? p : h),
    undefined,
  );
  if (holding !== undefined && ms < holding.windowMs) {
    throw new FloodgateError(
      "INVALID_ARGUMENT",
      `Invalid reservation ttl: ${ms} ms is shorter than the timeout of concurrency policy "${holding.name}" (${holding.windowMs} ms): its unit would stay held after the reservation can no longer be settled. Use a ttl of at least ${holding.windowMs} ms, or none.`,
    );
  }
  return ms;
}

export function checkKey(key: unknown): void {
  if (typeof key !== "string" || key.length === 0 || key.length > 1024 || key.charCodeAt(0) === 0) {
    throw new FloodgateError(
      "INVALID_ARGUMENT",
      `Invalid key: received ${describeValue(key)}; expected a non-empty string of at most 1024 characters not starting with NUL.`,
    );
  }
}

export function checkCost(cost: unknown): number {
  if (typeof cost !== "number" || !Number.isInteger(cost) || cost < 1 || cost > Number.MAX_SAFE_INTEGER) {
    throw new FloodgateError(
      "INVALID_ARGUMENT",
      `Invalid cost: received ${describeValue(cost)}; expected a whole number from 1 to 9007199254740991 (Number.MAX_SAFE_INTEGER).`,
    );
  }
  return cost;
}

export function checkCharge(charge: unknown, policyCount: number): asserts charge is Charge {
  const c = charge as Partial<Charge> | null;
  const marks = typeof c === "object" && c !== null ? c.marks : undefined;
  if (
    typeof c !== "object" || c === null || !Array.isArray(marks) || marks.length !== policyCount ||
    !marks.every((m) => Number.isSafeInteger(m)) || typeof c.cost !== "number" || !Number.isSafeInteger(c.cost) || c.cost < 1
  ) {
    throw new FloodgateError(
      "INVALID_ARGUMENT",
      `Invalid charge: received ${
        describeValue(charge)
      }; expected the \`charge\` of an admitted decision of this limiter (its cost and ${policyCount} mark${
        policyCount === 1 ? "" : "s"
      }), as it was returned.`,
    );
  }
}

/** Whole number >= 0 for an actual cost. */
export function checkActual(actual: unknown): number {
  if (typeof actual !== "number" || !Number.isInteger(actual) || actual < 0 || actual > Number.MAX_SAFE_INTEGER) {
    throw new FloodgateError(
      "INVALID_ARGUMENT",
      `Invalid actual cost: received ${
        describeValue(actual)
      }; expected a whole number from 0 to 9007199254740991 (0 cancels the reservation).`,
    );
  }
  return actual;
}

const ID_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

/** A reservation id as `limiter.settle()` accepts it. */
export function checkId(id: unknown): string {
  if (typeof id !== "string" || !ID_PATTERN.test(id)) {
    throw new FloodgateError(
      "INVALID_ARGUMENT",
      `Invalid reservation id: received ${
        describeValue(id)
      }; expected the \`id\` of a reservation of this limiter (1 to 64 characters from A-Z a-z 0-9 _ -), as it was returned.`,
    );
  }
  return id;
}
