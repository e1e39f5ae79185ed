import type { Attributes, Meter } from "@opentelemetry/api";
import type { StoreEvents } from "@floodgate/core/http";
import { ATTRIBUTES as A, METRICS } from "./names.ts";

// The resilient stores' events as metrics: failures by code, circuit openings, recoveries and
// state, and late charges given back. Attributes are made once per store (and code).

/** The store events that feed the metrics of `meter`. */
export function storeEventsOf(meter: Meter): StoreEvents {
  const failures = meter.createCounter(METRICS.storeFailures, {
    description: "Failed store calls, by error code (STORE_ERROR, STORE_TIMEOUT, STORE_UNAVAILABLE)",
    unit: "{call}",
  });
  const openings = meter.createCounter(METRICS.circuitOpenings, {
    description: "Circuit breaker openings, reopenings after a failed probe included",
    unit: "{opening}",
  });
  const recoveries = meter.createCounter(METRICS.circuitRecoveries, {
    description: "Circuits closed again by a successful probe",
    unit: "{recovery}",
  });
  const open = meter.createUpDownCounter(METRICS.circuitOpen, { description: "1 while a store's circuit is open, else 0", unit: "1" });
  const late = meter.createCounter(METRICS.lateCharges, {
    description: "Charges a store made after their call was abandoned: given back (returned) or not (kept)",
    unit: "{charge}",
  });
  const byStore = new Map<string, Attributes>();
  const storeAttributes = (store: string): Attributes => {
    let attributes = byStore.get(store);
    if (attributes === undefined) byStore.set(store, attributes = Object.freeze({ [A.store]: store }));
    return attributes;
  };
  const byCode = new Map<string, Attributes>();
  const tagged = (store: string, key: string, value: string): Attributes => {
    const id = `${store}\u0000${key}\u0000${value}`;
    let attributes = byCode.get(id);
    if (attributes === undefined) byCode.set(id, attributes = Object.freeze({ [A.store]: store, [key]: value }));
    return attributes;
  };
  const isOpen = new Set<string>();
  return {
    failure(store, error) {
      failures.add(1, tagged(store, A.errorType, error.code));
    },
    circuitOpened(store) {
      openings.add(1, storeAttributes(store));
      if (!isOpen.has(store)) {
        isOpen.add(store);
        open.add(1, storeAttributes(store));
      }
    },
    circuitClosed(store) {
      recoveries.add(1, storeAttributes(store));
      if (isOpen.delete(store)) open.add(-1, storeAttributes(store));
    },
    lateCharge(store, returned) {
      late.add(1, tagged(store, A.lateChargeResult, returned ? "returned" : "kept"));
    },
  };
}
