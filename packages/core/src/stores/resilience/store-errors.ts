import { describeValue, FloodgateError } from "../../errors.ts";
import type { RateLimitStore } from "../store.ts";

// The errors of the resilient store (../resilient-store.ts): every failure a STORE_* FloodgateError.

/** An error's message; anything else described (`String()` throws for an object without a prototype). */
export const errorText = (error: unknown): string => (error instanceof Error ? error.message : describeValue(error));

/** Wraps anything a store threw as a `FloodgateError` with code `STORE_ERROR` (keeping the cause). */
export function toStoreError(error: unknown, storeName: string): FloodgateError {
  // STORE_TIMEOUT, STORE_UNAVAILABLE or STORE_ERROR already.
  if (error instanceof FloodgateError && error.code.startsWith("STORE_")) return error;
  return new FloodgateError("STORE_ERROR", `The ${storeName} store failed: ${errorText(error)}`, { cause: error });
}

export const isCallersError = (error: unknown): boolean => error instanceof FloodgateError && error.code === "INVALID_ARGUMENT";

/** A wrapped store without reservations: the caller's error (INVALID_ARGUMENT), not the store's failing. */
export function unsupported(store: RateLimitStore, operation: string): never {
  throw new FloodgateError(
    "INVALID_ARGUMENT",
    `The ${store.name} store does not implement ${operation}(); reservations need a store that does.`,
  );
}

/** A call refused by the bound on calls in flight. */
export const inFlightFull = (name: string, inFlight: number, max: number): FloodgateError =>
  new FloodgateError(
    "STORE_UNAVAILABLE",
    `The ${name} store has ${inFlight} calls in flight already (maxInFlight ${max}); this call was not sent. The store is answering too slowly for the traffic: check its latency and load.`,
  );

/** A call refused while the circuit is open. */
export const circuitOpen = (name: string, openMs: number): FloodgateError =>
  new FloodgateError("STORE_UNAVAILABLE", `The ${name} store's circuit is open after repeated failures; retrying in ${openMs} ms.`);

/** A call refused while the one call of a cold start waits for the store's first answer. */
export const coldWaiting = (name: string): FloodgateError =>
  new FloodgateError("STORE_UNAVAILABLE", `The ${name} store has not answered yet; this call was not sent while another waits for it.`);

/** A call abandoned at its deadline. */
export const timedOut = (name: string, timeoutMs: number): FloodgateError =>
  new FloodgateError("STORE_TIMEOUT", `The ${name} store did not answer within ${timeoutMs} ms; the call was abandoned.`);
