import { isThenable } from "../stores/store.ts";
import { RETRY_AFTER } from "./headers.ts";
import type { HookCaller } from "./hooks.ts";
import type { PreparedResponse } from "./info.ts";
import type { HttpRateLimitOptions, RateLimitRequest } from "./options.ts";
import { limitedRetryAfter, type Responder } from "./response.ts";
import { RateLimitResult, type RequestEnd, RequestRateLimitInfo, type RequestView } from "./result.ts";
import type { CompiledRule, RuleLimiter } from "./rules.ts";
import { reservationEnd } from "./settlement.ts";
import type { StoreOutcome } from "./store-errors.ts";
import type { Warnings } from "./warnings.ts";

// A request's result from its store's answer on: the info, the headers, what the end of the
// response does, the hooks, and a limited request's response. A plain function: it waits only
// for a custom limited response that is a promise, so an admitted request is concluded without one.

/** The conclusion of one request charged `cost` to `key` under `rule`, once its store answered `outcome`. */
export type Conclude<Raw> = (
  req: RequestView<Raw>,
  rule: CompiledRule<Raw>,
  counted: RuleLimiter,
  key: string,
  cost: number,
  outcome: StoreOutcome,
) => RateLimitResult | Promise<RateLimitResult>;

/**
 * Builds a middleware's conclusion, once, from its options, hooks, what flush() waits for
 * (`track`), whether a request's final status gives it back (`refundWhen`), and its responder.
 */
export function concluding<Raw>(
  o: HttpRateLimitOptions<Raw>,
  callHook: HookCaller,
  track: (work: Promise<unknown>) => void,
  refundWhen: ((req: RateLimitRequest<Raw>, status: number) => boolean) | undefined,
  respond: Responder<Raw>,
  warnings: Warnings,
): Conclude<Raw> {
  return (req, rule, counted, key, cost, outcome) => {
    const limiter = counted.limiter;
    // Shadow mode, or outside the enforced fraction: decided and charged, never refused.
    const enforced = rule.enforced === undefined || rule.enforced(key);
    const info = new (counted.Info ?? RequestRateLimitInfo)(outcome, key, rule.name, cost, counted.figures, enforced);
    const decision = outcome.decision;
    // Leased mode: a lease refresh this decision started is work after the response too.
    if (decision?.source === "lease") {
      info.wait(decision.pending);
      track(decision.pending);
    }
    const writeHeaders = counted.writeHeaders;
    const headers = decision !== undefined && (enforced || rule.shadowHeaders) && writeHeaders !== undefined
      ? writeHeaders(decision, outcome.atMs)
      : [];
    const retryAfter = info.allowed ? 0 : limitedRetryAfter(decision, counted.policies, limiter.openForMs(outcome.atMs), outcome.atMs);
    if (!info.allowed) headers.push(RETRY_AFTER, `${retryAfter}`);

    // What the end of the response does, known now: `pending` waits for it from here on.
    const reservation = outcome.reservation;
    const end: RequestEnd | undefined = reservation !== undefined
      ? reservationEnd(
        limiter,
        { ...outcome, reservation },
        info,
        req,
        rule.actual,
        refundWhen && ((status) => refundWhen(req, status)),
        warnings,
        rule.settledCost,
      )
      : refundWhen !== undefined && decision !== undefined && decision.allowed
      ? (status) => refundWhen(req, status) ? limiter.refund(outcome.source, key, cost, decision.charge) : undefined
      : undefined;
    const untilEnd = end === undefined ? undefined : info.untilEnd();
    const ended = untilEnd && ((work: Promise<void> | void) => {
      untilEnd(work);
      if (work !== undefined) track(work);
    });
    // The hooks first: a custom handler that throws fails the request, not the metrics of a denial.
    const decided = o.onDecision === undefined ? undefined : callHook("onDecision", o.onDecision, info, req);
    if (isThenable(decided)) {
      info.wait(decided);
      track(decided);
    }
    const held = reservation !== undefined;
    if (info.allowed) return new RateLimitResult(info, headers, undefined, end, ended, held);
    const limited = callHook("onLimited", o.onLimited, info, req);
    if (isThenable(limited)) {
      info.wait(limited);
      track(limited);
    }
    const prepared = respond(req, info, headers, retryAfter);
    return isThenable(prepared)
      ? prepared.then((response: PreparedResponse) => new RateLimitResult(info, headers, response, end, ended, held))
      : new RateLimitResult(info, headers, prepared, end, ended, held);
  };
}
