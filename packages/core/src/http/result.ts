import { describeValue, FloodgateError } from "../errors.ts";
import type { Charge, Decision, PolicyDecision, PolicyWarning } from "../limiter/index.ts";
import { NO_POLICIES, NO_WARNINGS } from "../limiter/decisions.ts";
import type { RateLimitRequest, RequestAccess } from "./request.ts";
import type { DecisionOutcome, RateLimitInfo } from "./info.ts";
import { RESOLVED } from "../resolved.ts";
import type { ReportedFigures } from "./headers.ts";
import type { PreparedResponse } from "./info.ts";
import type { DecisionSource, StoreOutcome } from "./store-errors.ts";

export { RESOLVED } from "../resolved.ts";
export type { RateLimitInfo } from "./info.ts";
const ignore = (): void => {};

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
  declare readonly enforced: boolean;
  /** Units reported by the handler; `undefined` until it reports. */
  #reported: number | undefined;
  #pending: Promise<void> | undefined;
  /** Open while a report can still change the settlement. */
  #open = true;

  /**
   * `figures`: which policy the top-level figures describe (see `reportedFigures`); default the
   * decision's binding one. `enforced` false: the rule is in shadow for this request, which then
   * goes on whatever the decision (`outcome` tells whether it would have been limited).
   */
  constructor(
    outcome: StoreOutcome,
    key: string,
    rule: string,
    cost: number,
    figures?: (decision: Decision) => ReportedFigures,
    enforced = true,
  ) {
    const decision = outcome.decision;
    const shown = decision === undefined || figures === undefined ? decision : figures(decision);
    this.decision = decision;
    this.key = key;
    this.rule = rule;
    this.cost = cost;
    this.source = outcome.source;
    this.storeError = outcome.storeError;
    this.allowed = (decision === undefined ? outcome.source === "allow" : decision.allowed) || !enforced;
    this.limit = shown?.limit ?? 0;
    this.remaining = shown?.remaining ?? 0;
    this.resetAt = shown?.resetAt ?? 0;
    this.retryAfterMs = decision?.retryAfterMs ?? 0;
    this.policy = shown?.policy ?? "";
    this.enforced = enforced;
  }

  get outcome(): DecisionOutcome {
    if (this.source === "denyList") return "denyList";
    if (!this.allowed) return "limited";
    return this.shadowPolicy === undefined ? "allowed" : "shadowLimited";
  }

  get shadowPolicy(): string | undefined {
    const decision = this.decision;
    // A rule in shadow: what its decision would have refused went on.
    if (!this.enforced && (decision === undefined ? this.source === "deny" : !decision.allowed)) return decision?.policy ?? "";
    if (decision === undefined || !decision.allowed) return undefined;
    // Shadow policies are decided only when the enforced ones admit.
    for (const p of decision.shadow) if (!p.allowed) return p.policy;
    return undefined;
  }

  /** The shadow policies' figures (the decision's), or none. */
  get shadow(): readonly PolicyDecision[] {
    return this.decision?.shadow ?? NO_POLICIES;
  }

  get warnings(): readonly PolicyWarning[] {
    return this.decision?.warnings ?? NO_WARNINGS;
  }

  /** The decision's policies, or none when no store answered. */
  get policies(): readonly PolicyDecision[] {
    return this.decision?.policies ?? [];
  }

  /** What the request was charged into (the decision's), for a refund into it. */
  get charge(): Charge | undefined {
    return this.decision?.charge;
  }

  get pending(): Promise<void> {
    return this.#pending ?? RESOLVED;
  }

  report(units: number): void {
    if (typeof units !== "number" || !Number.isInteger(units) || units < 0 || units > Number.MAX_SAFE_INTEGER) {
      throw new FloodgateError(
        "INVALID_ARGUMENT",
        `rateLimit.report(): received ${describeValue(units)}; expected the units used so far, a whole number from 0 to 9007199254740991.`,
      );
    }
    if (this.#open) this.#reported = units;
  }

  /** What the handler reported, and closes reporting: the settlement reads it once. */
  takeReport(): number | undefined {
    this.#open = false;
    return this.#reported;
  }

  /**
   * Makes {@link pending} wait for what the end of the response starts, from now on (so that a
   * hook reading `pending` already sees it): returns the function the end hands its work to.
   */
  untilEnd(): (work: Promise<void> | void) => void {
    let ended!: (work: Promise<void> | void) => void;
    this.wait(new Promise<Promise<void> | void>((resolve) => ended = resolve));
    return ended;
  }

  /** Adds `work` to {@link pending} (a rejection is swallowed: its failure was reported where it happened). */
  wait(work: Promise<unknown>): void {
    const all = this.#pending === undefined ? work : Promise.all([this.#pending, work]);
    this.#pending = all.then(ignore, ignore);
  }

  /** The figures, key, rule, cost and source (not the decision object or the store error). */
  toJSON(): object {
    const { decision: _d, storeError: _e, ...plain } = this;
    return {
      ...plain,
      policies: this.policies,
      outcome: this.outcome,
      shadowPolicy: this.shadowPolicy,
      shadow: this.shadow,
      warnings: this.warnings,
    };
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
  /** Whether the request holds a reservation (a concurrency unit, or a cost's estimate) until it is settled. */
  declare readonly holds: boolean;
  #end: RequestEnd | undefined;
  #ended: ((work: Promise<void> | void) => void) | undefined;

  /**
   * Built by {@link HttpRateLimiter.decideRequest}; `end` is set only when something is done
   * once the response ends: a settlement, a release, or a refund by the final status; `ended`
   * (from `untilEnd()` of the info) is then handed what it starts, for `info.pending`.
   */
  constructor(
    info: RateLimitInfo,
    headers: readonly string[],
    response: PreparedResponse | undefined,
    end: RequestEnd | undefined,
    ended?: (work: Promise<void> | void) => void,
    holds = false,
  ) {
    this.info = info;
    this.holds = holds;
    this.allowed = info.allowed;
    this.headers = headers;
    this.response = response;
    this.#end = end;
    this.#ended = ended;
  }

  /** True when the adapter should report how the response ended through {@link settle}. */
  get settles(): boolean {
    return this.#end !== undefined;
  }

  /**
   * Reports how the request ended, once: its status, or 0 when the client disconnected (or the
   * body failed) before the response was completely sent; and the response itself (Node's
   * `ServerResponse` or a fetch `Response`), whose headers a cost's `actual` may read. Settles
   * a cost settled later, releases a concurrency unit, or refunds by the status, as the rule says.
   */
  settle(status: number, response?: unknown): void {
    this.#finish(status, response, false);
  }

  /**
   * Closes the handler's reports: what it reports after this (its client has gone and the
   * response is over, though the handler may still run) does not change the settlement.
   */
  endReports(): void {
    if (this.info instanceof RequestRateLimitInfo) this.info.takeReport();
  }

  /**
   * Settles a request whose handler never ran because its client was gone by the time it was
   * decided: as a disconnect (status 0), except that a cost settled later settles 0 units (the
   * handler used nothing). Gives a concurrency unit back at once.
   */
  abandon(): void {
    this.#finish(0, undefined, true);
  }

  #finish(status: number, response: unknown, notRun: boolean): void {
    const end = this.#end;
    if (end === undefined) return;
    this.#end = undefined;
    let work: Promise<void> | void = undefined;
    try {
      work = end(status, response, notRun);
    } finally {
      this.#ended?.(work);
    }
  }
}

/**
 * What is done once a response ends: given its status (0: not completely sent), the response,
 * and whether the handler never ran.
 */
export type RequestEnd = (status: number, response: unknown, notRun?: boolean) => Promise<void> | void;

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
