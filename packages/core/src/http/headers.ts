import { algorithmOf } from "../algorithms/algorithm.ts";
import type { Decision } from "../limiter/index.ts";
import type { Policy } from "../policy.ts";
import { holdsInFlight } from "./in-flight.ts";

// Every header and parameter name Floodgate writes, in one place: the IETF draft is still moving
// (an open proposal may rename `r`/`t` again). Plain constants, so a bundle holds each name once.
const LEGACY_LIMIT = "X-RateLimit-Limit";
const LEGACY_REMAINING = "X-RateLimit-Remaining";
const LEGACY_RESET = "X-RateLimit-Reset";
const DRAFT_LIMIT = "RateLimit-Limit";
const DRAFT_REMAINING = "RateLimit-Remaining";
const DRAFT_RESET = "RateLimit-Reset";
const RATE_LIMIT = "RateLimit";
const RATE_LIMIT_POLICY = "RateLimit-Policy";
export const RETRY_AFTER = "Retry-After";
/** draft-11 `RateLimit-Policy` parameters: quota and window (seconds). */
const QUOTA = "q";
const WINDOW = "w";
/** draft-11 `RateLimit-Policy` quota unit (`qu`), written for concurrency policies only (the default unit is requests). */
const QUOTA_UNIT = "qu";
/** draft-11 `RateLimit` parameters: remaining quota and seconds until it is restored. */
const REMAINING = "r";
const RESET = "t";

/** Every header and parameter name Floodgate writes. */
export const HEADER_NAMES = {
  /** `X-RateLimit-Limit` (the `"legacy"` format): the binding policy's limit. */
  legacyLimit: LEGACY_LIMIT,
  /** `X-RateLimit-Remaining` (`"legacy"`): units left. */
  legacyRemaining: LEGACY_REMAINING,
  /** `X-RateLimit-Reset` (`"legacy"`): when the quota is restored. */
  legacyReset: LEGACY_RESET,
  /** `RateLimit-Limit` (`"draft-6"`): the binding policy's limit. */
  draftLimit: DRAFT_LIMIT,
  /** `RateLimit-Remaining` (`"draft-6"`): units left. */
  draftRemaining: DRAFT_REMAINING,
  /** `RateLimit-Reset` (`"draft-6"`): seconds until the quota is restored. */
  draftReset: DRAFT_RESET,
  /** `RateLimit` (`"draft-7"` combined, `"draft-11"` as a named list). */
  rateLimit: RATE_LIMIT,
  /** `RateLimit-Policy` (`"draft-6"`, `"draft-7"`, `"draft-11"`): the policies' quotas and windows. */
  rateLimitPolicy: RATE_LIMIT_POLICY,
  /** `Retry-After`: whole seconds a limited client should wait. */
  retryAfter: RETRY_AFTER,
  /** `q`, the draft-11 `RateLimit-Policy` parameter for the quota. */
  quota: QUOTA,
  /** `w`, the draft-11 `RateLimit-Policy` parameter for the window in seconds. */
  window: WINDOW,
  /** `qu`, the draft-11 `RateLimit-Policy` quota unit: `"concurrent-requests"` for a concurrency policy. */
  quotaUnit: QUOTA_UNIT,
  /** `r`, the draft-11 `RateLimit` parameter for the remaining quota. */
  remaining: REMAINING,
  /** `t`, the draft-11 `RateLimit` parameter for the seconds until the quota is restored. */
  reset: RESET,
} as const;

/**
 * Each header name Floodgate writes, in lower case, as the adapters on Node's HTTP server send it.
 * Node's `setHeader` lower-cases every name it stores, and its `_storeHeader` again each name of 4
 * to 17 characters as it writes the head: a name already in lower case comes back as it is, where
 * a mixed-case one is copied into a new string each time, which V8 must then look up in its
 * string table to use it as a key. Written out, not made with `toLowerCase()`: a literal is one
 * string V8 has already looked up. Header names are case-insensitive (HTTP/2 sends only lower case).
 */
export const NODE_HEADER_NAMES: ReadonlyMap<string, string> = new Map([
  [LEGACY_LIMIT, "x-ratelimit-limit"],
  [LEGACY_REMAINING, "x-ratelimit-remaining"],
  [LEGACY_RESET, "x-ratelimit-reset"],
  [DRAFT_LIMIT, "ratelimit-limit"],
  [DRAFT_REMAINING, "ratelimit-remaining"],
  [DRAFT_RESET, "ratelimit-reset"],
  [RATE_LIMIT, "ratelimit"],
  [RATE_LIMIT_POLICY, "ratelimit-policy"],
  [RETRY_AFTER, "retry-after"],
]);

/**
 * A header family: `"legacy"` (`X-RateLimit-*`), `"draft-6"` (`RateLimit-Limit`/`-Remaining`/
 * `-Reset` + `RateLimit-Policy`), `"draft-7"` (combined `RateLimit` + `RateLimit-Policy`),
 * `"draft-11"` (the current IETF draft: `RateLimit-Policy` and `RateLimit` as named lists).
 */
export type HeaderFormat = "legacy" | "draft-6" | "draft-7" | "draft-11";

/** The default: legacy headers plus the current IETF draft. */
export const DEFAULT_HEADER_FORMATS: readonly HeaderFormat[] = ["legacy", "draft-11"];

/** The rate-limit headers of one decision as flat `[name, value, name, value, ...]` pairs, in a new array. */
export type HeaderWriter = (decision: Decision, nowMs: number) => string[];

/** Appends one format's headers of a decision to `out`. */
type FormatWriter = (decision: Decision, nowMs: number, out: string[]) => void;

/** The figures the single-policy headers (legacy, draft-6, draft-7) and `info.remaining` report. */
export type ReportedFigures = Pick<Decision, "limit" | "remaining" | "resetAt" | "policy">;

/**
 * Which policy a decision's single-policy headers and `remaining` describe: the decision's binding
 * policy, except that an admitted request beside a policy of requests in flight reports the rate
 * policy with the least left, the quota a client can plan with (a unit in flight comes back when
 * the response ends; draft-11 reports it in an item of its own). A refused request reports the
 * policy that refused it.
 */
export function reportedFigures(policies: readonly Policy[]): (decision: Decision) => ReportedFigures {
  const rate = policies.flatMap((p, i) => (holdsInFlight(p) ? [] : [i]));
  if (rate.length === policies.length || rate.length === 0) return (d) => d;
  return (d) => {
    if (!d.allowed) return d;
    let chosen = d.policies[rate[0]!]!;
    for (let i = 1; i < rate.length; i++) {
      const p = d.policies[rate[i]!]!;
      if (p.remaining < chosen.remaining) chosen = p;
    }
    return chosen;
  };
}

export const secondsUntil = (atMs: number, nowMs: number): number => (atMs <= nowMs ? 0 : Math.ceil((atMs - nowMs) / 1000));

/**
 * Whole seconds, rounded up, a 429 tells the client to wait (at least 1): the longest wait of the
 * denying policies, so never earlier than any of their `t`. A cost above a policy's limit
 * (`Infinity`) cannot be helped by waiting: that policy points at its full restore, at least its window.
 */
export function retryAfterSeconds(decision: Decision, policies: readonly Policy[], nowMs: number): number {
  let seconds = 1;
  for (const p of decision.policies) {
    if (!p.allowed) {
      seconds = Math.max(
        seconds,
        p.retryAfterMs !== Infinity
          ? Math.ceil(p.retryAfterMs / 1000)
          : Math.max(secondsUntil(p.resetAt, nowMs), Math.ceil(policies.find((q) => q.name === p.policy)!.windowMs / 1000)),
      );
    }
  }
  return seconds;
}

/** Whole seconds of a window, at least 1. */
const windowSeconds = (ms: number): number => Math.max(1, Math.ceil(ms / 1000));

/**
 * Per policy, its `RateLimit-Policy` text (`make(p, w)`) for a decision's `resetAt`: made once for
 * a kind whose windows all have one length; for one whose windows differ in length (a calendar
 * window: a 23-hour day, February, a billing cycle), with the length of the window ending at
 * `resetAt`, made again only when `resetAt` changes (once a period).
 */
function policyTexts(policies: readonly Policy[], make: (p: Policy, w: number) => string): ((resetAt: number) => string)[] {
  return policies.map((p) => {
    const fixed = make(p, windowSeconds(p.windowMs));
    const at = algorithmOf(p)?.windowMsAt;
    if (at === undefined) return () => fixed;
    let last = NaN;
    let text = fixed;
    return (resetAt) => {
      if (resetAt !== last) text = (last = resetAt) > 0 && resetAt < Infinity ? make(p, windowSeconds(at(p, resetAt))) : fixed;
      return text;
    };
  });
}

/**
 * Precomputes, once per rule, every constant part of its headers (policy lists, quoted names,
 * window seconds) and returns a writer that only fills in the numbers per request (and the window
 * of a policy whose windows differ in length).
 */
export function createHeaderWriter(
  formats: readonly HeaderFormat[],
  policies: readonly Policy[],
  legacyReset: "epoch" | "delta",
): HeaderWriter | undefined {
  if (formats.length === 0) return undefined;
  const short = policyTexts(policies, (p, w) => `${p.limit};${WINDOW}=${w}`);
  const index = new Map(policies.map((p, i) => [p.name, i]));
  const shortOf = (d: ReportedFigures): string => short[index.get(d.policy) ?? -1]?.(d.resetAt) ?? "";
  const figures = reportedFigures(policies);
  // The limit's text, made once: a policy's limit does not change.
  const first = policies[0]!;
  const firstLimit = `${first.limit}`;
  const limitText = (d: ReportedFigures): string => (d.limit === first.limit ? firstLimit : `${d.limit}`);
  // The reset's epoch seconds change once a second at most: their text is made again only then.
  let epochSeconds = -1;
  let epochText = "";
  const epochOf = (resetAt: number): string => {
    const seconds = Math.ceil(resetAt / 1000);
    if (seconds !== epochSeconds) {
      epochSeconds = seconds;
      epochText = `${seconds}`;
    }
    return epochText;
  };
  // A limit of requests in flight: its quota unit, and no window (its timeout is not one).
  const ietf = policyTexts(
    policies,
    (p, w) =>
      holdsInFlight(p)
        ? `"${p.name}";${QUOTA}=${p.limit};${QUOTA_UNIT}="concurrent-requests"`
        : `"${p.name}";${QUOTA}=${p.limit};${WINDOW}=${w}`,
  );
  // Every window of one length: the whole header's text made once.
  const ietfConstant = policies.every((p) => algorithmOf(p)?.windowMsAt === undefined) ? ietf.map((t) => t(0)).join(", ") : undefined;
  const ietfPolicy = (d: Decision): string => ietfConstant ?? d.policies.map((p, i) => ietf[i]!(p.resetAt)).join(", ");
  const ietfPrefix = policies.map((p) => `"${p.name}";${REMAINING}=`);
  const single = policies.length === 1;
  // A denied policy's `t` is when it admits again, so Retry-After never points earlier than it.
  const resetOf = (resetAt: number, retryAfterMs: number, now: number): number =>
    retryAfterMs > 0 && retryAfterMs !== Infinity ? Math.ceil(retryAfterMs / 1000) : secondsUntil(resetAt, now);
  if (single && legacyReset === "epoch" && formats === DEFAULT_HEADER_FORMATS) {
    // The default, one policy: its figures are the decision's, written in one array made at its
    // size, the remaining units made into text once for both headers.
    const prefix = ietfPrefix[0]!;
    return (d, now) => {
      const remaining = `${d.remaining}`;
      return [
        LEGACY_LIMIT,
        limitText(d),
        LEGACY_REMAINING,
        remaining,
        LEGACY_RESET,
        epochOf(d.resetAt),
        RATE_LIMIT_POLICY,
        ietfPolicy(d),
        RATE_LIMIT,
        `${prefix}${remaining};${RESET}=${resetOf(d.resetAt, d.retryAfterMs, now)}`,
      ];
    };
  }
  const writers: FormatWriter[] = [];
  for (const format of formats) {
    if (format === "legacy") {
      writers.push(
        legacyReset === "epoch"
          ? (decision, _now, out) => {
            const d = figures(decision);
            out.push(LEGACY_LIMIT, limitText(d), LEGACY_REMAINING, `${d.remaining}`, LEGACY_RESET, epochOf(d.resetAt));
          }
          : (decision, now, out) => {
            const d = figures(decision);
            out.push(LEGACY_LIMIT, limitText(d), LEGACY_REMAINING, `${d.remaining}`, LEGACY_RESET, `${secondsUntil(d.resetAt, now)}`);
          },
      );
    } else if (format === "draft-6") {
      writers.push((decision, now, out) => {
        const d = figures(decision);
        out.push(
          DRAFT_LIMIT,
          limitText(d),
          DRAFT_REMAINING,
          `${d.remaining}`,
          DRAFT_RESET,
          `${secondsUntil(d.resetAt, now)}`,
          RATE_LIMIT_POLICY,
          shortOf(d),
        );
      });
    } else if (format === "draft-7") {
      writers.push((decision, now, out) => {
        const d = figures(decision);
        out.push(
          RATE_LIMIT,
          `limit=${d.limit}, remaining=${d.remaining}, reset=${secondsUntil(d.resetAt, now)}`,
          RATE_LIMIT_POLICY,
          shortOf(d),
        );
      });
    } else {
      const entry = (i: number, remaining: number, resetAt: number, retryAfterMs: number, now: number): string =>
        `${ietfPrefix[i]}${remaining};${RESET}=${resetOf(resetAt, retryAfterMs, now)}`;
      writers.push(
        single
          ? (d, now, out) => {
            out.push(RATE_LIMIT_POLICY, ietfPolicy(d), RATE_LIMIT, entry(0, d.remaining, d.resetAt, d.retryAfterMs, now));
          }
          : (d, now, out) => {
            let value = "";
            const all = d.policies;
            for (let i = 0; i < all.length; i++) {
              const p = all[i]!;
              value += (i === 0 ? "" : ", ") + entry(i, p.remaining, p.resetAt, p.retryAfterMs, now);
            }
            out.push(RATE_LIMIT_POLICY, ietfPolicy(d), RATE_LIMIT, value);
          },
      );
    }
  }
  return (d, now) => {
    const out: string[] = [];
    for (const w of writers) w(d, now, out);
    return out;
  };
}
