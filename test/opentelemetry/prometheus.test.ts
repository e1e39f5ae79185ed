// A Prometheus scrape over HTTP from @opentelemetry/exporter-prometheus, read by the independent
// parser of test/support/prometheus-text.ts: the counters move as requests are limited, and every
// query of the Grafana dashboard (docs/grafana/floodgate-dashboard.json) names a metric and labels
// that the scrape shows, under the exporter's own name translation. Two apps on a real Redis: one
// exact (limited requests; then the server is paused, for fallback decisions, store failures and
// an open circuit), one leased (decisions from leases).
//   npx vitest run test/opentelemetry/prometheus.test.ts
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Redis as IORedis } from "ioredis";
import { PrometheusExporter } from "@opentelemetry/exporter-prometheus";
import { MeterProvider } from "@opentelemetry/sdk-metrics";
import { fixedWindow, redisStore } from "@floodgate/core";
import { floodgateTelemetry } from "@floodgate/opentelemetry";
import { type Family, parsePrometheusText, sampleSum } from "../support/prometheus-text.ts";
import { freePort, type RedisInstance, startRedis } from "../support/redis-server.ts";
import { hono } from "../http/targets.ts";

const DASHBOARD = new URL("../../docs/grafana/floodgate-dashboard.json", import.meta.url);
const OPERATING = new URL("../../docs/operating.md", import.meta.url);

describe("a Prometheus scrape", () => {
  let redis: RedisInstance;
  let client: IORedis;
  let exporter: PrometheusExporter;
  let url: string;
  beforeAll(async () => {
    redis = await startRedis();
    client = new IORedis(redis.port, redis.host, { maxRetriesPerRequest: 1 });
    const port = await freePort();
    exporter = new PrometheusExporter({ host: "127.0.0.1", port, preventServerStart: true });
    await exporter.startServer();
    url = `http://127.0.0.1:${port}/metrics`;
  });
  afterAll(async () => {
    await exporter?.shutdown();
    client?.disconnect();
    await redis?.stop();
  });

  const scrape = async (): Promise<Map<string, Family>> => {
    const response = await fetch(url);
    expect(response.status).toBe(200);
    return parsePrometheusText(await response.text());
  };
  let last: Map<string, Family>;

  it("shows the counters move as requests are limited, fall back and come from leases", async () => {
    const telemetry = floodgateTelemetry({ meterProvider: new MeterProvider({ readers: [exporter] }) });
    const prefix = `otel-prom-${Date.now()}`;
    const exact = await hono.start(telemetry.instrument({
      store: redisStore({ client }),
      prefix: `${prefix}-exact:`,
      rules: { "GET /api/login": fixedWindow({ limit: 2, window: "1h", name: "login" }) },
      policy: fixedWindow({ limit: 1000, window: "1h", name: "hourly" }),
      timeoutMs: 1000,
      circuitBreaker: { failures: 2, cooldownMs: 60_000 },
      logger: { warn: () => undefined },
    }));
    const leased = await hono.start(telemetry.instrument({
      store: redisStore({ client }),
      prefix: `${prefix}-leased:`,
      policy: fixedWindow({ limit: 1000, window: "1h", name: "hourly" }),
      mode: "leased",
    }));
    const limited = { floodgate_rule: "GET /api/login", floodgate_decision_outcome: "limited" };

    for (let i = 0; i < 2; i++) expect((await exact.send("/api/login")).status).toBe(200);
    const before = await scrape();
    expect(sampleSum(before, "floodgate_decisions_total", { floodgate_rule: "GET /api/login", floodgate_decision_outcome: "allowed" }))
      .toBe(2);
    expect(sampleSum(before, "floodgate_decisions_total", limited)).toBe(0);
    for (let i = 0; i < 3; i++) expect((await exact.send("/api/login")).status).toBe(429);
    const after = await scrape();
    expect(sampleSum(after, "floodgate_decisions_total", limited)).toBe(3);
    expect(sampleSum(after, "floodgate_decisions_total", { ...limited, floodgate_policy: "login", floodgate_store_name: "redis" })).toBe(3);

    for (let i = 0; i < 20; i++) expect((await leased.send("/api/x")).status).toBe(200);
    await leased.handle.flush();
    expect((await exact.send("/api/x")).status).toBe(200);
    redis.kill("SIGSTOP");
    try {
      for (let i = 0; i < 3; i++) expect((await exact.send("/api/x")).status).toBe(200);
    } finally {
      redis.kill("SIGCONT");
    }
    last = await scrape();
    expect(sampleSum(last, "floodgate_decisions_total", { floodgate_decision_source: "fallback" })).toBe(3);
    expect(sampleSum(last, "floodgate_decisions_total", { floodgate_decision_source: "lease" })).toBeGreaterThan(0);
    expect(sampleSum(last, "floodgate_store_failures_total", { error_type: "STORE_TIMEOUT" })).toBe(2);
    expect(sampleSum(last, "floodgate_store_circuit_open", { floodgate_store_name: "redis" })).toBe(1);
    expect(sampleSum(last, "floodgate_leases_total", { floodgate_lease_action: "granted" })).toBeGreaterThan(0);
    // One duration per decision.
    expect(sampleSum(last, "floodgate_decision_duration_count")).toBe(sampleSum(last, "floodgate_decisions_total"));
  });

  it("every query of the Grafana dashboard names metrics and labels the scrape shows", () => {
    expect(last).toBeDefined();
    const dashboard = JSON.parse(readFileSync(DASHBOARD, "utf8"));
    const queries: string[] = [];
    for (const panel of dashboard.panels) for (const target of panel.targets) queries.push(target.expr);
    for (const variable of dashboard.templating.list) if (variable.type === "query") queries.push(variable.query);
    expect(queries.length).toBeGreaterThanOrEqual(10);
    // And the alerting examples of docs/operating.md.
    const alerts = [...readFileSync(OPERATING, "utf8").matchAll(/```promql\n([\s\S]*?)```/g)].map((m) => m[1]!);
    expect(alerts.length).toBeGreaterThanOrEqual(4);
    queries.push(...alerts);
    const labelsOf = new Map<string, Set<string>>();
    for (const family of last.values()) {
      for (const s of family.samples) {
        const labels = labelsOf.get(s.name) ?? new Set<string>();
        for (const label of Object.keys(s.labels)) labels.add(label);
        labelsOf.set(s.name, labels);
      }
    }
    for (const query of queries) {
      const { metrics, labels } = promqlNames(query);
      expect(metrics.length, query).toBeGreaterThan(0);
      for (const metric of metrics) expect(labelsOf.has(metric), `${metric} in ${query}`).toBe(true);
      // Each label the query filters or groups by is on at least one of its metrics.
      for (const label of labels) {
        expect(metrics.some((m) => labelsOf.get(m)?.has(label)), `label ${label} in ${query}`).toBe(true);
      }
    }
  });
});

const FUNCTIONS = new Set([
  "sum",
  "max",
  "min",
  "avg",
  "count",
  "topk",
  "bottomk",
  "rate",
  "increase",
  "irate",
  "histogram_quantile",
  "by",
  "without",
  "on",
  "ignoring",
  "and",
  "or",
  "unless",
  "vector",
  "label_values",
  "clamp_min",
  "clamp_max",
]);

/** The metric names and label names a PromQL query (or a Grafana `label_values(...)`) names. */
function promqlNames(query: string): { metrics: string[]; labels: string[] } {
  const metrics = new Set<string>();
  const labels = new Set<string>();
  // Grafana variables ($__rate_interval, $rule) and range selectors go first; strings are values.
  let q = query.replace(/\$\w+/g, "").replace(/\boffset\s+\d+[smhdwy]/g, "").replace(/"(?:[^"\\]|\\.)*"/g, '""').replace(/\[[^\]]*\]/g, "");
  // Matchers: {label op "value", ...}
  q = q.replace(/\{([^}]*)\}/g, (_, inner: string) => {
    for (const m of inner.matchAll(/([a-zA-Z_]\w*)\s*(=~|!~|!=|=)/g)) labels.add(m[1]!);
    return " ";
  });
  // Grouping: by (a, b) / without (a)
  q = q.replace(/\b(by|without)\s*\(([^)]*)\)/g, (_, _kind, inner: string) => {
    for (const l of inner.split(",")) if (l.trim() !== "") labels.add(l.trim());
    return " ";
  });
  // label_values(metric, label)
  q = q.replace(/label_values\(\s*([a-zA-Z_:][\w:]*)\s*,\s*([a-zA-Z_]\w*)\s*\)/g, (_, metric: string, label: string) => {
    metrics.add(metric);
    labels.add(label);
    return " ";
  });
  for (const m of q.matchAll(/[a-zA-Z_:][\w:]*/g)) if (!FUNCTIONS.has(m[0])) metrics.add(m[0]);
  // histogram buckets are grouped by `le`, which only _bucket series carry
  return { metrics: [...metrics], labels: [...labels] };
}
