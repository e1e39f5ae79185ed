// The real OpenTelemetry SDKs for the tests of @floodgate/opentelemetry: a MeterProvider read by
// an in-memory reader (a MetricReader collected on demand), a tracer provider exporting into the
// SDK's InMemorySpanExporter, and AsyncLocalStorage as the context manager (the active span
// follows a request through its awaits, as in an instrumented app).
import { context } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { type DataPoint, type Histogram, MeterProvider, MetricReader } from "@opentelemetry/sdk-metrics";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";

class InMemoryReader extends MetricReader {
  protected override onForceFlush(): Promise<void> {
    return Promise.resolve();
  }
  protected override onShutdown(): Promise<void> {
    return Promise.resolve();
  }
}

let contextManager: AsyncLocalStorageContextManager | undefined;

/** Registers AsyncLocalStorage as the global context manager, once. */
export function useAsyncContext(): void {
  if (contextManager !== undefined) return;
  contextManager = new AsyncLocalStorageContextManager().enable();
  context.setGlobalContextManager(contextManager);
}

/** One point of a collected metric: its attributes and value (a number, or a histogram's). */
export interface Point {
  readonly attributes: Record<string, unknown>;
  readonly value: number | Histogram;
}

export interface Sdk {
  readonly meterProvider: MeterProvider;
  readonly tracerProvider: BasicTracerProvider;
  readonly spans: InMemorySpanExporter;
  /** Every point of `name` as collected now. */
  points(name: string): Promise<Point[]>;
  /** The sum of a counter's points whose attributes include `match`. */
  sum(name: string, match?: Record<string, unknown>): Promise<number>;
}

export function createSdk(): Sdk {
  useAsyncContext();
  const reader = new InMemoryReader();
  const meterProvider = new MeterProvider({ readers: [reader] });
  const spans = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] });
  const points = async (name: string): Promise<Point[]> => {
    const { resourceMetrics } = await reader.collect();
    const out: Point[] = [];
    for (const scope of resourceMetrics.scopeMetrics) {
      for (const metric of scope.metrics) {
        if (metric.descriptor.name !== name) continue;
        for (const p of metric.dataPoints as DataPoint<number | Histogram>[]) out.push({ attributes: p.attributes, value: p.value });
      }
    }
    return out;
  };
  return {
    meterProvider,
    tracerProvider,
    spans,
    points,
    async sum(name, match = {}) {
      let total = 0;
      for (const p of await points(name)) {
        if (Object.entries(match).every(([k, v]) => p.attributes[k] === v)) total += typeof p.value === "number" ? p.value : p.value.count;
      }
      return total;
    },
  };
}
