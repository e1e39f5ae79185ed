// Shadow mode, warning thresholds and skipped requests in the metrics, through every adapter.
import { describe, expect, it } from "vitest";
import { fixedWindow, type HttpRateLimitOptions, memoryStore } from "@floodgate/core";
import { ATTRIBUTES as A, floodgateTelemetry, METRICS } from "@floodgate/opentelemetry";
import { TARGETS } from "../http/targets.ts";
import { createSdk } from "./sdk.ts";

const perHour = (limit: number, name: string) => fixedWindow({ limit, window: "1h", name });

describe.each(TARGETS.map((t) => [t.name, t] as const))("%s", (_name, target) => {
  it("shadow_limited decisions, warnings by rule and policy, and skipped requests by reason", async () => {
    const sdk = createSdk();
    const telemetry = floodgateTelemetry({ meterProvider: sdk.meterProvider });
    const app = await target.start(telemetry.instrument({
      store: memoryStore(),
      rules: {
        "GET /api/shadow": { policy: perHour(2, "shadowed"), shadow: true },
        "GET /api/warned": { policy: perHour(4, "warned"), warnAt: 0.5 },
        "GET /api/free": { policy: perHour(4, "free"), cost: 0 },
      },
      allowList: ["allowed-key"],
      key: (req) => req.header("x-user"),
    } as HttpRateLimitOptions<any>));
    try {
      for (let i = 0; i < 4; i++) expect((await app.send("/api/shadow")).status).toBe(200);
      for (let i = 0; i < 4; i++) await app.send("/api/warned");
      await app.send("/api/free");
      await app.send("/api/warned", { headers: { "x-user": "allowed-key" } });
      await app.send("/api/none");
      expect(await sdk.sum(METRICS.decisions, { [A.rule]: "GET /api/shadow", [A.outcome]: "shadow_limited" })).toBe(2);
      expect(await sdk.sum(METRICS.decisions, { [A.rule]: "GET /api/shadow", [A.outcome]: "allowed" })).toBe(2);
      expect(await sdk.sum(METRICS.warnings, { [A.rule]: "GET /api/warned", [A.policy]: "warned" })).toBeGreaterThan(0);
      expect(await sdk.sum(METRICS.decisions, { [A.outcome]: "skipped", [A.skipReason]: "zero_cost" })).toBe(1);
      expect(await sdk.sum(METRICS.decisions, { [A.outcome]: "skipped", [A.skipReason]: "allow_list" })).toBe(1);
      expect(await sdk.sum(METRICS.decisions, { [A.outcome]: "skipped", [A.skipReason]: "no_rule" })).toBe(1);
    } finally {
      await app.close();
    }
  });
});
