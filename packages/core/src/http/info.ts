import type { FloodgateError } from "../errors.ts";
import type { Decision, PolicyWarning } from "../limiter/types.ts";
import type { StoreSource } from "../stores/store.ts";
import type { DimensionDecision } from "../compound/types.ts";

/*
 * What a request's decision looks like to hooks, handlers and the app: plain types.
 */

/**
 * Where a request's decision came from: the store (`"store"`: its backend; `"cache"`: its local
 * deny cache, see {@link StoreSource}), this instance's lease (`"lease"`, leased mode), the local
 * fallback limiter, the store-error policy (`"allow"`, `"deny"`), or the `denyList` (refused
 * before anything was counted).
 */
export type DecisionSource = StoreSource | "lease" | "fallback" | "allow" | "deny" | "denyList";

export type { PolicyWarning } from "../limiter/types.ts";

/**
 * What happened to a request, for metrics and logs: `"allowed"`, it went on within its limits;
 * `"limited"`, it was refused (429); `"denyList"`, the deny list refused it (403, nothing
 * counted); `"shadowLimited"`, it would have been limited (by `shadowPolicy`) but went on, its
 * rule being in shadow mode, outside the enforced fraction, or the policy a shadow one.
 */
export type DecisionOutcome = "allowed" | "limited" | "denyList" | "shadowLimited";

/** Why a request was not counted at all, as `onSkipped` receives it: `skip` returned true, the `allowList` has it, no rule (or `policy` function) limits it, or its cost was 0. */
export type SkipReason = "skip" | "allowList" | "noRule" | "zeroCost";

/**
 * What Floodgate decided for one request, exposed to hooks and as `c.get("rateLimit")` etc.: the
 * limiter's figures (a `limit` of 0 when no limiter decided: the store-error policy did) and where
 * they came from.
 */
export interface RateLimitInfo extends Omit<Decision, "source"> {
  /** The key counted (with the rule's own namespace in the store). */
  readonly key: string;
  /** The matched rule's pattern, or `"default"`. */
  readonly rule: string;
  /** The units this request was charged (or would have been, when denied): the rule's `cost`, default 1. */
  readonly cost: number;
  /** Where the decision came from: the store's backend or its deny cache, the local fallback limiter, or the store-error policy. */
  readonly source: DecisionSource;
  /** The store failure behind a `fallback`, `allow` or `deny` decision. */
  readonly storeError: FloodgateError | undefined;
  /** The limiter's decision (`undefined` for `allow`/`deny` after a store failure). */
  readonly decision: Decision | undefined;
  /** What happened to the request: allowed, limited, refused by the deny list, or limited in shadow only (it went on). */
  readonly outcome: DecisionOutcome;
  /** Whether this request's rule was enforced (false: shadow mode, or outside the enforced fraction). */
  readonly enforced: boolean;
  /** The policy that would have limited this request when `outcome` is "shadowLimited"; else undefined. */
  readonly shadowPolicy: string | undefined;
  /** The warning thresholds (`warnAt`) this request crossed (usually empty). */
  readonly warnings: readonly PolicyWarning[];
  /**
   * For a rule with `dimensions`: the binding dimension, the one that refused the request (or,
   * admitted, the one with the fewest units left), whose figures `limit`, `remaining`, `resetAt`
   * and `retryAfterMs` are. `undefined` for a rule of one key, and when no store answered.
   */
  readonly dimension?: string | undefined;
  /** For a rule with `dimensions`: every dimension's key and figures, by name; else `undefined`. */
  readonly dimensions?: Readonly<Record<string, DimensionDecision>> | undefined;
  /**
   * Everything Floodgate still does for this request after the response: the settlement of a
   * cost settled later, the release of a concurrency unit, a `skipSuccessfulRequests` refund, a
   * hook's promise. Resolves when all of it is done; never rejects (a failure goes to
   * `onStoreError` or the logger). Already resolved when there is nothing to wait for. The Hono
   * middleware and `withRateLimit` hand it to the platform's `waitUntil` themselves.
   */
  readonly pending: Promise<void>;
  /**
   * Reports the units this request has used so far (a whole number >= 0, replacing an earlier
   * report), for a rule whose `cost` is `{ estimate, actual? }`: what is settled when the
   * response ends without an `actual` answer, or is aborted. Ignored for other rules and once
   * the request is settled.
   */
  report(units: number): void;
}

/** A limited request's response, prepared for an adapter to send as it is. */
export interface PreparedResponse {
  /** The status to send (429 unless `statusCode` or the handler says otherwise). */
  readonly status: number;
  /** Flat `[name, value, ...]` pairs, rate-limit headers and Content-Type included. */
  readonly headers: readonly string[];
  /** The body, ready to send as it is; `null` for none. */
  readonly body: string | null;
}

/** What to do when the store fails, times out, or its circuit is open. */
export type StoreErrorAction = "allow" | "deny" | "fallback";
