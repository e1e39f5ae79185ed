/**
 * OpenTelemetry metrics and traces for Floodgate's HTTP middlewares and `withRateLimit`: every
 * decision counted by rule, policy, outcome, source and store, its duration, the stores' failures
 * and circuit breaker, late charges given back, leases and reservations; the decision on the
 * active span, and a child span around each remote store call. Its only peer dependency is
 * `@opentelemetry/api`: with no SDK registered, every instrument is a no-op.
 *
 * @example
 * import { floodgateTelemetry } from "@floodgate/opentelemetry";
 * const telemetry = floodgateTelemetry();
 * app.use(rateLimit(telemetry.instrument({ store: redisStore({ client }), policy: slidingWindow({ limit: 100, window: "1m" }) })));
 *
 * @module @floodgate/opentelemetry
 */
import { type MeterProvider, metrics, type Span, trace, type TracerProvider } from "@opentelemetry/api";
import type { HttpRateLimitOptions, RateLimitInfo, RateLimitRequest, StoreEvents } from "@floodgate/core/http";
import { FloodgateError, type RateLimitStore } from "@floodgate/core/store";
import { DecisionRecorder } from "./decisions.ts";
import { METRICS } from "./names.ts";
import { storeEventsOf } from "./store-events.ts";
import { reportingStore } from "./store.ts";

export { ATTRIBUTES, METRICS } from "./names.ts";
export { type Outcome, outcomeOf } from "./decisions.ts";

/** Options of {@link floodgateTelemetry}. */
export interface TelemetryOptions {
  /** Where the metrics go (default: the global one, `metrics.getMeterProvider()`). */
  meterProvider?: MeterProvider;
  /** Where the spans go (default: the global one, `trace.getTracerProvider()`). */
  tracerProvider?: TracerProvider;
  /**
   * Opt-in: a `floodgate.key.group` attribute on decisions, from the key. It must map keys to a
   * small, bounded set (a plan, a tier, "internal"/"external"), never to the key itself: every
   * distinct value is a new time series. `undefined` leaves the attribute out. Default: none.
   */
  keyAttribute?: (key: string) => string | undefined;
  /** A child span around each remote store call (default `true`). */
  storeSpans?: boolean;
}

/** Instruments made once, to put on one or several middlewares. */
export interface FloodgateTelemetry {
  /**
   * The same options with the telemetry in: `onDecision` and `onSkipped` (the app's own still
   * called, after), `skip` (where the decision time starts), `storeEvents`, and every store of
   * `store` and `rules` wrapped by {@link FloodgateTelemetry.instrumentStore}.
   */
  instrument<O extends HttpRateLimitOptions<any>>(options: O): O;
  /** A store whose calls get a child span (remote stores) and whose leases and reservations are counted. */
  instrumentStore(store: RateLimitStore): RateLimitStore;
  /** For `storeEvents` (HTTP options) or `resilientStore(store, { events })`: failures, circuit, late charges. */
  readonly storeEvents: StoreEvents;
  /** Records one decision, for an app that composes its own `onDecision`. */
  onDecision(info: RateLimitInfo, req?: RateLimitRequest<unknown>): void;
}

const NAME = "@floodgate/opentelemetry";
const VERSION = "0.1.0";
const OPTIONS = ["meterProvider", "tracerProvider", "keyAttribute", "storeSpans"];

const invalid = (option: string, expected: string): FloodgateError =>
  new FloodgateError("INVALID_OPTION", `floodgateTelemetry(): option \`${option}\` must be ${expected}.`);

function check(options: TelemetryOptions): void {
  if (typeof options !== "object" || options === null) throw invalid("options", "an object");
  for (const name of Object.keys(options)) {
    if (!OPTIONS.includes(name)) {
      throw new FloodgateError(
        "INVALID_OPTION",
        `floodgateTelemetry(): unknown option \`${name}\`; accepted: ${OPTIONS.join(", ")}.`,
      );
    }
  }
  const { meterProvider, tracerProvider, keyAttribute, storeSpans } = options;
  if (meterProvider !== undefined && typeof meterProvider?.getMeter !== "function") {
    throw invalid("meterProvider", "a MeterProvider (an object with getMeter())");
  }
  if (tracerProvider !== undefined && typeof tracerProvider?.getTracer !== "function") {
    throw invalid("tracerProvider", "a TracerProvider (an object with getTracer())");
  }
  if (keyAttribute !== undefined && typeof keyAttribute !== "function") {
    throw invalid("keyAttribute", "a function mapping a key to a bounded group (a string), or undefined");
  }
  if (storeSpans !== undefined && typeof storeSpans !== "boolean") throw invalid("storeSpans", "a boolean");
}

/** A request's start, for the decision time: set by the `skip` that {@link FloodgateTelemetry.instrument} puts in. */
const STARTED = Symbol("floodgate.telemetry.startedAt");
type Started = { [STARTED]?: number };

/**
 * Makes the instruments, once: a meter and a tracer named `@floodgate/opentelemetry` from the
 * given or global providers. Names and attributes: {@link METRICS}, {@link ATTRIBUTES} and
 * docs/operating.md ("Metrics and traces").
 */
export function floodgateTelemetry(options: TelemetryOptions = {}): FloodgateTelemetry {
  check(options);
  const meter = (options.meterProvider ?? metrics.getMeterProvider()).getMeter(NAME, VERSION);
  const tracer = options.storeSpans === false ? undefined : (options.tracerProvider ?? trace.getTracerProvider()).getTracer(NAME, VERSION);
  const decisions = meter.createCounter(METRICS.decisions, {
    description: "Rate-limit decisions, by rule, policy, outcome and source",
    unit: "{decision}",
  });
  const duration = meter.createHistogram(METRICS.decisionDuration, {
    description: "Time from a request reaching the rate limiter to its decision",
    unit: "s",
    advice: { explicitBucketBoundaries: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1] },
  });
  const warnings = meter.createCounter(METRICS.warnings, {
    description: "Decisions past a policy's warning threshold",
    unit: "{decision}",
  });
  const leases = meter.createCounter(METRICS.leases, { description: "Leases granted, refreshed and returned", unit: "{lease}" });
  const reservations = meter.createCounter(METRICS.reservations, {
    description: "Reservations settled, and settlements that found theirs expired",
    unit: "{reservation}",
  });
  const storeInstruments = { tracer, leases, reservations };
  const stores = new WeakMap<RateLimitStore, RateLimitStore>();
  const instrumentStore = (store: RateLimitStore): RateLimitStore => {
    if (typeof store !== "object" || store === null || typeof store.consume !== "function") {
      throw new FloodgateError("INVALID_ARGUMENT", "instrumentStore(): expected a store, such as memoryStore() or redisStore().");
    }
    let wrapped = stores.get(store);
    if (wrapped === undefined) stores.set(store, wrapped = reportingStore(store, storeInstruments));
    return wrapped;
  };
  const storeEvents = storeEventsOf(meter);
  // The active span is the context's, whichever provider made it.
  const activeSpan = (): Span | undefined => trace.getActiveSpan();

  /** One recorder per instrumented options: it knows their rules' stores. */
  const recorder = (storeOf: (rule: string) => string | undefined): DecisionRecorder =>
    new DecisionRecorder({ decisions, duration, warnings }, storeOf, options.keyAttribute);
  const shared = recorder(() => undefined);

  return {
    instrumentStore,
    storeEvents,
    onDecision(info, req) {
      shared.record(info, (req as Started | undefined)?.[STARTED], activeSpan());
    },
    instrument<O extends HttpRateLimitOptions<any>>(given: O): O {
      if (typeof given !== "object" || given === null) {
        throw new FloodgateError("INVALID_ARGUMENT", "instrument(): expected the options of rateLimit() or withRateLimit().");
      }
      const o: HttpRateLimitOptions<any> = { ...given };
      const storeNames = new Map<string, string>();
      if (o.store !== undefined) o.store = instrumentStore(o.store);
      const base = o.store?.name ?? o.limiter?.store.name ?? (o.limiter === undefined ? "memory" : undefined);
      if (base !== undefined) storeNames.set("default", base);
      if (o.rules !== undefined) {
        const rules: NonNullable<typeof o.rules> = {};
        for (const [pattern, rule] of Object.entries(o.rules)) {
          const own = ruleStore(rule);
          if (own !== undefined) rules[pattern] = { ...(rule as object), store: instrumentStore(own) };
          else rules[pattern] = rule;
          const name = own?.name ?? (rule as { limiter?: { store: RateLimitStore } }).limiter?.store.name ?? base;
          if (name !== undefined) storeNames.set(pattern, name);
        }
        o.rules = rules;
      }
      const record = recorder((rule) => storeNames.get(rule) ?? base);
      const theirs = o.onDecision;
      o.onDecision = (info, req) => {
        record.record(info, (req as Started)[STARTED], activeSpan());
        return theirs?.(info, req);
      };
      const skip = o.skip;
      // `skip` is called first for every request: the decision time starts there.
      o.skip = (req) => {
        (req as Started)[STARTED] = performance.now();
        return skip === undefined ? false : skip(req);
      };
      const theirsSkipped = o.onSkipped;
      o.onSkipped = (req, reason) => {
        record.skipped(SKIP_REASONS[reason] ?? reason, (req as Started)[STARTED]);
        theirsSkipped?.(req, reason);
      };
      o.storeEvents = o.storeEvents === undefined ? storeEvents : both(o.storeEvents, storeEvents);
      return o as O;
    },
  };
}

/** The `floodgate.skip.reason` values, from the HTTP layer's reasons. */
const SKIP_REASONS: Readonly<Record<string, string>> = { skip: "skip", allowList: "allow_list", noRule: "no_rule", zeroCost: "zero_cost" };

/** A rule's own store, when it names one. */
function ruleStore(rule: unknown): RateLimitStore | undefined {
  if (typeof rule !== "object" || rule === null || Array.isArray(rule) || "kind" in rule) return undefined;
  return (rule as { store?: RateLimitStore }).store;
}

/** The app's store events first, then ours. */
function both(theirs: StoreEvents, ours: StoreEvents): StoreEvents {
  return {
    failure: (store, error) => {
      theirs.failure?.(store, error);
      ours.failure!(store, error);
    },
    circuitOpened: (store, ms) => {
      theirs.circuitOpened?.(store, ms);
      ours.circuitOpened!(store, ms);
    },
    circuitClosed: (store, ms) => {
      theirs.circuitClosed?.(store, ms);
      ours.circuitClosed!(store, ms);
    },
    lateCharge: (store, returned) => {
      theirs.lateCharge?.(store, returned);
      ours.lateCharge!(store, returned);
    },
  };
}
