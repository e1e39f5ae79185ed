import { type Attributes, type Counter, type Span, SpanKind, SpanStatusCode, type Tracer } from "@opentelemetry/api";
import {
  FIELDS_PER_POLICY,
  type HeldReservation,
  isThenable,
  type LeaseRequest,
  type MaybePromise,
  type PolicySet,
  type RateLimitStore,
  type StoreResult,
} from "@floodgate/core/store";
import { ATTRIBUTES as A, STORE_SPAN_PREFIX } from "./names.ts";

// A store that reports: a child span around each call to a remote store, and the leases and
// reservations its answers show. It passes every call and answer through unchanged, so it keeps
// every guarantee of the store it wraps (test/opentelemetry/store-contract.test.ts).

/** What an instrumented store writes to. */
export interface StoreInstruments {
  /** `undefined`: no spans. */
  readonly tracer: Tracer | undefined;
  readonly leases: Counter;
  readonly reservations: Counter;
}

/** The counters' attributes for one store, made once. */
interface StoreAttributes {
  readonly span: Attributes;
  readonly granted: Attributes;
  readonly refreshed: Attributes;
  readonly returned: Attributes;
  readonly settled: Attributes;
  readonly expired: Attributes;
}

const attributesOf = (name: string): StoreAttributes => {
  const with_ = (key: string, value: string): Attributes => Object.freeze({ [A.store]: name, [key]: value });
  return {
    span: Object.freeze({ [A.store]: name }),
    granted: with_(A.leaseAction, "granted"),
    refreshed: with_(A.leaseAction, "refreshed"),
    returned: with_(A.leaseAction, "returned"),
    settled: with_(A.reservationResult, "settled"),
    expired: with_(A.reservationResult, "expired"),
  };
};

/** Ends `span` when `answer` settles (at once when it is not a promise); passes `answer` on. */
function ended<T>(span: Span | undefined, answer: MaybePromise<T>): MaybePromise<T> {
  if (span === undefined) return answer;
  if (!isThenable(answer)) {
    span.end();
    return answer;
  }
  return answer.then(
    (value) => {
      span.end();
      return value;
    },
    (error: unknown) => {
      const code = (error as { code?: unknown } | null)?.code;
      span.setAttribute(A.errorType, typeof code === "string" ? code : (error as Error | null)?.name ?? "Error");
      span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error | null)?.message });
      span.end();
      throw error;
    },
  );
}

/**
 * Wraps `store` so that its calls are seen: a child span of the active one around each call to a
 * remote store (not the memory store, which answers in-process), and the `floodgate.leases` and
 * `floodgate.reservations` counters. Calls and answers pass through unchanged.
 */
export function reportingStore(store: RateLimitStore, instruments: StoreInstruments): RateLimitStore {
  const name = store.name;
  const attributes = attributesOf(name);
  const tracer = store.synchronous === true ? undefined : instruments.tracer;
  const spanOf = (operation: string): Span | undefined =>
    tracer?.startSpan(STORE_SPAN_PREFIX + operation, {
      kind: SpanKind.CLIENT,
      attributes: { ...attributes.span, [A.operation]: operation },
    });
  const settledOrNot = (settled: boolean): boolean => {
    instruments.reservations.add(1, settled ? attributes.settled : attributes.expired);
    return settled;
  };
  const counted = (request: LeaseRequest, set: PolicySet, result: StoreResult): StoreResult => {
    // The deny cache answers without a call (its last field 0): nothing was granted or returned.
    if (result[result.length - 1] === 0) return result;
    const count = set.policies.length;
    if (request.returns !== undefined && request.returns.length > 0) instruments.leases.add(request.returns.length, attributes.returned);
    if ((result[1 + count * FIELDS_PER_POLICY + count] ?? 0) > 0) {
      instruments.leases.add(1, request.cost === 0 ? attributes.refreshed : attributes.granted);
    }
    return result;
  };

  const wrapped: RateLimitStore = {
    name,
    consume: (set, key, cost, nowMs, signal) => ended(spanOf("consume"), store.consume(set, key, cost, nowMs, signal)),
    peek: (set, key, nowMs, signal) => ended(spanOf("peek"), store.peek(set, key, nowMs, signal)),
    refund: (set, key, cost, nowMs, marks) => ended(spanOf("refund"), store.refund(set, key, cost, nowMs, marks)),
    reset: (set, key) => ended(spanOf("reset"), store.reset(set, key)),
  };
  const w = wrapped as { -readonly [K in keyof RateLimitStore]: RateLimitStore[K] };
  if (store.ownsClock !== undefined) w.ownsClock = store.ownsClock;
  if (store.synchronous !== undefined) w.synchronous = store.synchronous;
  if (store.reserve !== undefined) {
    w.reserve = (set, key, cost, nowMs, id, ttlMs, signal) =>
      ended(spanOf("reserve"), store.reserve!(set, key, cost, nowMs, id, ttlMs, signal));
  }
  if (store.settle !== undefined) {
    w.settle = (set, key, id, actual, nowMs) => {
      const answer = ended(spanOf("settle"), store.settle!(set, key, id, actual, nowMs));
      return isThenable(answer) ? answer.then(settledOrNot) : settledOrNot(answer);
    };
  }
  if (store.reserveHeld !== undefined) {
    w.reserveHeld = (set, key, cost, nowMs, ttlMs) => {
      const held = store.reserveHeld!(set, key, cost, nowMs, ttlMs);
      if (Array.isArray(held)) return held;
      const reservation = held as HeldReservation;
      return {
        result: reservation.result,
        id: reservation.id,
        settle: (actual: number, atMs: number) => settledOrNot(reservation.settle(actual, atMs)),
      };
    };
  }
  if (store.lease !== undefined) {
    w.lease = (set, key, request, nowMs, signal) => {
      const answer = ended(spanOf("lease"), store.lease!(set, key, request, nowMs, signal));
      return isThenable(answer) ? answer.then((result) => counted(request, set, result)) : counted(request, set, answer);
    };
  }
  if (store.penalty !== undefined) {
    w.penalty = (set, key, cost, nowMs) => ended(spanOf("penalty"), store.penalty!(set, key, cost, nowMs));
  }
  if (store.block !== undefined) {
    w.block = (set, key, durationMs, nowMs) => ended(spanOf("block"), store.block!(set, key, durationMs, nowMs));
  }
  if (store.unblock !== undefined) w.unblock = (set, key) => ended(spanOf("unblock"), store.unblock!(set, key));
  if (store.dispose !== undefined) w.dispose = () => store.dispose!();
  if (store.reconnect !== undefined) w.reconnect = () => store.reconnect!();
  return wrapped;
}
