import type { FloodgateError } from "../errors.ts";
import type { Charge, Decision, PolicyDecision } from "../limiter.ts";
import type { RateLimitRequest, RequestAccess } from "./options.ts";
import type { PreparedResponse } from "./response.ts";
import type { DecisionSource, StoreOutcome } from "./store-guard.ts";

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
  /** Where the decision came from: the store, the local fallback limiter, or the store-error policy. */
  readonly source: DecisionSource;
  /** The store failure behind a `fallback`, `allow` or `deny` decision. */
  readonly storeError: FloodgateError | undefined;
  /** The limiter's decision (`undefined` for `allow`/`deny` after a store failure). */
  readonly decision: Decision | undefined;
}

/** {@link RateLimitInfo} of one request: the figures copied from the decision once, for hooks and handlers to read. */
export class RequestRateLimitInfo implements RateLimitInfo {
  // `declare`: assigned once in the constructor, not first defined as undefined (one store each).
  declare readonly decision: Decision | undefined;
  declare readonly key: string;
  declare readonly rule: string;
  declare readonly cost: number;
  declare readonly source: DecisionSource;
  declare readonly storeError: FloodgateError | undefined;
  declare readonly allowed: boolean;
  /** The decision's figures; 0 (and `policy` "") when no store answered (`source` "allow"/"deny"). */
  declare readonly limit: number;
  declare readonly remaining: number;
  declare readonly resetAt: number;
  declare readonly retryAfterMs: number;
  declare readonly policy: string;

  constructor(outcome: StoreOutcome, key: string, rule: string, cost: number) {
    const decision = outcome.decision;
    this.decision = decision;
    this.key = key;
    this.rule = rule;
    this.cost = cost;
    this.source = outcome.source;
    this.storeError = outcome.storeError;
    this.allowed = decision === undefined ? outcome.source === "allow" : decision.allowed;
    this.limit = decision?.limit ?? 0;
    this.remaining = decision?.remaining ?? 0;
    this.resetAt = decision?.resetAt ?? 0;
    this.retryAfterMs = decision?.retryAfterMs ?? 0;
    this.policy = decision?.policy ?? "";
  }

  /** The decision's policies, or none when no store answered. */
  get policies(): readonly PolicyDecision[] {
    return this.decision?.policies ?? [];
  }

  /** What the request was charged into (the decision's), for a refund into it. */
  get charge(): Charge | undefined {
    return this.decision?.charge;
  }

  /** The figures, key, rule, cost and source (not the decision object or the store error). */
  toJSON(): object {
    const { decision: _d, storeError: _e, ...plain } = this;
    return { ...plain, policies: this.policies };
  }
}

/** What {@link HttpRateLimiter.decideRequest} hands the adapter: everything it needs to answer or go on. */
export class RateLimitResult {
  /** The decision's figures, as hooks, handlers and `c.get("rateLimit")` see them. */
  declare readonly info: RateLimitInfo;
  /** Whether the request goes on to the handler (`info.allowed`). */
  declare readonly allowed: boolean;
  /**
   * Rate-limit headers as flat `[name, value, ...]` pairs: to set on the response of an allowed
   * request (a limited one's are in `response`, with Retry-After).
   */
  declare readonly headers: readonly string[];
  /** The response to send when not allowed. */
  declare readonly response: PreparedResponse | undefined;
  #refund: ((status: number) => void) | undefined;

  /**
   * Built by {@link HttpRateLimiter.decideRequest}; `refund` is set only when the request's final
   * status may give its units back (`skipSuccessfulRequests`/`skipFailedRequests`).
   */
  constructor(
    info: RateLimitInfo,
    headers: readonly string[],
    response: PreparedResponse | undefined,
    refund: ((status: number) => void) | undefined,
  ) {
    this.info = info;
    this.allowed = info.allowed;
    this.headers = headers;
    this.response = response;
    this.#refund = refund;
  }

  /** True when the adapter should report the final status through {@link settle}. */
  get settles(): boolean {
    return this.#refund !== undefined;
  }

  /**
   * Reports how the request ended: its status, or 0 when the client disconnected before the
   * response finished. Refunds (once) when `skipSuccessfulRequests`/`skipFailedRequests` say so.
   */
  settle(status: number): void {
    const refund = this.#refund;
    if (refund === undefined) return;
    this.#refund = undefined;
    refund(status);
  }
}

/** The request as the callbacks see it: the facts read once, headers on demand. */
export class RequestView<Raw> implements RateLimitRequest<Raw> {
  declare readonly raw: Raw;
  declare readonly method: string;
  declare readonly path: string;
  declare readonly ip: string | undefined;
  declare readonly access: RequestAccess<Raw>;

  constructor(raw: Raw, method: string, path: string, ip: string | undefined, access: RequestAccess<Raw>) {
    this.raw = raw;
    this.method = method;
    this.path = path;
    this.ip = ip;
    this.access = access;
  }

  header(name: string): string | undefined {
    return this.access.header(this.raw, name);
  }
}
