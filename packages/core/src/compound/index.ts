/*
 * Compound limits: one decision over several dimensions (types.ts), made in one store step where
 * the store has one (create.ts) and otherwise dimension by dimension (ordered.ts).
 */
export { createCompoundLimiter } from "./create.ts";
export type {
  CompoundCharge,
  CompoundDecision,
  CompoundKeys,
  CompoundLimiter,
  CompoundLimiterOptions,
  CompoundReservation,
  DimensionDecision,
} from "./types.ts";
