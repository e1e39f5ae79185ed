import type { Policy } from "../policy.ts";

// The options of rolling out a limit, as the middleware and each rule take them (a rule's own
// win over the middleware's): shadow mode, gradual enforcement, shadow policies and warnings.

/** Shadow mode, gradual enforcement, shadow policies and warning thresholds (docs/operating.md). */
export interface RolloutOptions {
  /**
   * Shadow mode: every request is decided and charged as when enforced, but goes on even when it
   * would have been limited (no 429, no `onLimited`, no rate-limit headers unless
   * `shadowHeaders`); `info.outcome` is then `"shadowLimited"` and `info.shadowPolicy` names the
   * policy. For every rule that does not set its own. Default false.
   */
  shadow?: boolean;
  /**
   * Gradual enforcement: the fraction of clients (0 to 1) whose requests are enforced, chosen by
   * a stable hash of the key (the same client is always in or out at a given fraction, and one in
   * at 0.01 is in at 0.05); the others are in shadow mode. For every rule that does not set its
   * own. Default 1.
   */
  enforce?: number;
  /** Send the rate-limit headers on requests in shadow mode too (never Retry-After). Default false. */
  shadowHeaders?: boolean;
  /**
   * Policies decided and charged in shadow beside `policy` (see `createRateLimiter`'s
   * `shadowPolicy`): they never change what `policy` decides; a request one of them would have
   * limited goes on with `info.outcome` `"shadowLimited"`. Not with a ready `limiter` (give the
   * limiter its own).
   */
  shadowPolicy?: Policy | readonly Policy[];
  /**
   * Warning thresholds (see `createRateLimiter`'s `warnAt`): a fraction of the limit used, or
   * fractions by policy name. The request that crosses one has it in `info.warnings`, once per
   * window (once per crossing for a token bucket). For every rule that does not set its own.
   */
  warnAt?: number | Readonly<Record<string, number>>;
}
