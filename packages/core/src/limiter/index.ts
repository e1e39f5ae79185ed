/*
 * The limiter: its public types (types.ts), its argument checks (checks.ts), its decisions
 * (decisions.ts), its reservations (reservation.ts) and its construction (create.ts).
 */
export { createRateLimiter } from "./create.ts";
export type {
  Charge,
  Decision,
  LimitOptions,
  PolicyDecision,
  PolicyWarning,
  RateLimiter,
  RateLimiterOptions,
  RefundOptions,
  Reservation,
  ReserveOptions,
  SettleOptions,
} from "./types.ts";
