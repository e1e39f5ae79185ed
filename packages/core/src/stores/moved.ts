import { answeredLocally as answered } from "./store.ts";
import type * as contract from "./store.ts";
import { evaluateState as evaluate } from "./state/evaluate.ts";
import type * as state from "./state/types.ts";

/*
 * Names for store authors that the application entry exported before `@floodgate/core/store`
 * existed: kept there as deprecated aliases, so that code importing them keeps working.
 */

/** @deprecated Import it from `@floodgate/core/store`, the entry for store authors. */
export const answeredLocally: typeof answered = answered;
/** @deprecated Import it from `@floodgate/core/store`, the entry for store authors. */
export const evaluateState: typeof evaluate = evaluate;
/** @deprecated Import it from `@floodgate/core/store`, the entry for store authors. */
export type CallSignal = contract.CallSignal;
/** @deprecated Import it from `@floodgate/core/store`, the entry for store authors. */
export type LeaseRequest = contract.LeaseRequest;
/** @deprecated Import it from `@floodgate/core/store`, the entry for store authors. */
export type LeaseReturn = contract.LeaseReturn;
/** @deprecated Import it from `@floodgate/core/store`, the entry for store authors. */
export type LocalStoreResult = contract.LocalStoreResult;
/** @deprecated Import it from `@floodgate/core/store`, the entry for store authors. */
export type PolicySet = contract.PolicySet;
/** @deprecated Import it from `@floodgate/core/store`, the entry for store authors. */
export type StoreResult = contract.StoreResult;
/** @deprecated Import it from `@floodgate/core/store`, the entry for store authors. */
export type EvaluateMode = state.EvaluateMode;
/** @deprecated Import it from `@floodgate/core/store`, the entry for store authors. */
export type KeyState = state.KeyState;
/** @deprecated Import it from `@floodgate/core/store`, the entry for store authors. */
export type ReservationArgs = state.ReservationArgs;
/** @deprecated Import it from `@floodgate/core/store`, the entry for store authors. */
export type StateEvaluation = state.StateEvaluation;
