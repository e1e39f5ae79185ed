// Every metric, span and attribute name this package emits, in one place: the table in
// docs/operating.md ("Metrics and traces") lists exactly these. Names follow OpenTelemetry's
// semantic conventions where one exists (`error.type`), and ASP.NET Core's rate-limiting metrics
// (`aspnetcore.rate_limiting.*`) in style elsewhere.

/** Metric names (OpenTelemetry form; a Prometheus exporter writes dots as underscores and adds `_total` to counters). */
export const METRICS = {
  /** Counter: every decision, by rule, policy, outcome, source and store. */
  decisions: "floodgate.decisions",
  /** Histogram, seconds: from the request reaching the limiter to its decision. */
  decisionDuration: "floodgate.decision.duration",
  /** Counter: failed store calls by `error.type` (STORE_ERROR, STORE_TIMEOUT, STORE_UNAVAILABLE). */
  storeFailures: "floodgate.store.failures",
  /** Counter: circuit breaker openings (a failed probe reopening it counts again). */
  circuitOpenings: "floodgate.store.circuit.openings",
  /** Counter: circuits closed by a successful probe. */
  circuitRecoveries: "floodgate.store.circuit.recoveries",
  /** UpDownCounter: 1 while a store's circuit is open, else 0. */
  circuitOpen: "floodgate.store.circuit.open",
  /** Counter: late charges (admitted after their call was abandoned), by whether they were given back. */
  lateCharges: "floodgate.store.late_charges",
  /** Counter: leases granted (with a request), refreshed (in the background) and returned. */
  leases: "floodgate.leases",
  /** Counter: reservations settled, and settlements that found none (expired). */
  reservations: "floodgate.reservations",
  /** Counter: decisions that crossed a policy's warning threshold, by rule and policy. */
  warnings: "floodgate.warnings",
} as const;

/** Attribute names. */
export const ATTRIBUTES = {
  /** The matched rule's pattern, or `default`. */
  rule: "floodgate.rule",
  /** The binding policy's name (absent when no policy decided). */
  policy: "floodgate.policy",
  /** allowed, limited, deny_listed, skipped, shadow_limited. */
  outcome: "floodgate.decision.outcome",
  /** store, deny_cache, lease, fallback, allow, deny (absent for deny_listed and skipped). */
  source: "floodgate.decision.source",
  /** The store's name: memory, redis, upstash, postgres... */
  store: "floodgate.store.name",
  /** Opt-in, from `keyAttribute`: a bounded group of the key (a plan, a tenant tier). */
  keyGroup: "floodgate.key.group",
  /** Why a request was skipped: skip, allow_list, method. */
  skipReason: "floodgate.skip.reason",
  /** The store operation of a span or a failure: consume, lease, reserve, settle... */
  operation: "floodgate.store.operation",
  /** Semantic convention: the error's class, here its FloodgateError code. */
  errorType: "error.type",
  /** leases: granted, refreshed, returned. */
  leaseAction: "floodgate.lease.action",
  /** reservations: settled, expired. */
  reservationResult: "floodgate.reservation.result",
  /** late_charges: returned (given back), kept (could not be). */
  lateChargeResult: "floodgate.late_charge.result",
  /** Span only: units the binding policy has left. */
  remaining: "floodgate.decision.remaining",
  /** Span only: seconds until the same request would be allowed (0 when allowed). */
  retryAfter: "floodgate.decision.retry_after",
  /** Span only: the policy a shadow decision would have limited by. */
  shadowPolicy: "floodgate.decision.shadow_policy",
} as const;

/** Span names: one child span per remote store call. */
export const STORE_SPAN_PREFIX = "floodgate.store.";
