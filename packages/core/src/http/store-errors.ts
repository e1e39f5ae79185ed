import type { FloodgateError } from "../errors.ts";
import type { Decision } from "../limiter/index.ts";
import type { Reservation } from "../limiter/index.ts";
import { isResilientStore, resilientStore, type ResilientStoreOptions } from "../stores/resilient-store.ts";
import type { RateLimitStore } from "../stores/store.ts";
import type { HookCaller } from "./hooks.ts";
import type { DecisionSource, StoreErrorAction } from "./info.ts";
import type { HttpRateLimitOptions, RateLimitRequest } from "./options.ts";

// Store errors in the HTTP layer: what a failed store call becomes for a request (the local
// fallback limiter, an allow or a deny, as `onStoreError` says), and the resilient wrapper each
// middleware puts around its remote stores (the deadline, the circuit breaker and the bound on
// calls in flight are the resilient store's, stores/resilient-store.ts).

export type { StoreErrorAction } from "./info.ts";

export type { CircuitBreakerOptions, StoreEvents } from "../stores/resilient-store.ts";
export { errorText, toStoreError } from "../stores/resilient-store.ts";

export type { DecisionSource } from "./info.ts";

/** A store call's outcome, whichever way it went. */
export interface StoreOutcome {
  /** The limiter's decision; `undefined` when the store-error policy allowed or denied. */
  readonly decision: Decision | undefined;
  readonly source: DecisionSource;
  /** The store failure behind a `fallback`, `allow` or `deny` outcome. */
  readonly storeError: FloodgateError | undefined;
  /** The clock when the answer was in: what the response's header deltas are counted from. */
  readonly atMs: number;
  /** An admitted reservation, to settle or cancel when the response ends (`FailoverLimiter.reserve`). */
  readonly reservation?: Reservation | undefined;
}

/** How every rule of one middleware handles a store error: the `onStoreError` option. */
export interface StoreErrorHandling {
  readonly clock: () => number;
  /** The action for a failed call: the `onStoreError` hook's choice, else the configured action. */
  choose(error: FloodgateError, req: RateLimitRequest): StoreErrorAction;
  /** Tells `onStoreError` of a failure no request waits for (a refund), whose answer has no use. */
  report(error: FloodgateError): void;
}

const STORE_ERROR_ACTIONS: readonly StoreErrorAction[] = ["allow", "deny", "fallback"];

/** The handling that `onStoreError` and `clock` describe. */
export function storeErrorHandling<Raw>(
  onStoreError: HttpRateLimitOptions<Raw>["onStoreError"],
  clock: () => number,
  callHook: HookCaller,
): StoreErrorHandling {
  // The requests `choose` gets are this middleware's own, whose `raw` is a Raw.
  const hook = typeof onStoreError === "function"
    ? onStoreError as (error: FloodgateError, req: RateLimitRequest | undefined) => StoreErrorAction | void
    : undefined;
  const action: StoreErrorAction = typeof onStoreError === "string" ? onStoreError : "fallback";
  return {
    clock,
    choose(error, req) {
      const chosen = callHook("onStoreError", hook, error, req);
      return STORE_ERROR_ACTIONS.includes(chosen as StoreErrorAction) ? chosen as StoreErrorAction : action;
    },
    report(error) {
      callHook("onStoreError", hook, error, undefined);
    },
  };
}

/** The resilience options of one middleware: its `timeoutMs`, `circuitBreaker` and `logger`. */
export type ResilienceOptions = Pick<ResilientStoreOptions, "timeoutMs" | "circuitBreaker" | "logger" | "events">;

/**
 * The stores one middleware's rules count in, each behind one resilient wrapper with the
 * middleware's options, shared by the rules on it (one breaker and in-flight bound per store).
 * A store that answers synchronously (memory) is used as it is; a store the app wrapped itself
 * keeps its wrapper.
 */
export function resilientStores(options: ResilienceOptions): (store: RateLimitStore) => RateLimitStore {
  const wrapped = new Map<RateLimitStore, RateLimitStore>();
  return (bare) => {
    if (bare.synchronous === true || isResilientStore(bare)) return bare;
    let store = wrapped.get(bare);
    if (store === undefined) wrapped.set(bare, store = resilientStore(bare, options));
    return store;
  };
}
