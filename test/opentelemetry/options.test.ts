// floodgateTelemetry()'s options and composition: bad options are clear errors; the app's own
// onDecision and storeEvents still run; the key is an attribute only through keyAttribute, mapped
// to a bounded group; with no SDK registered, everything is a no-op and requests are decided as
// without it.
import { describe, expect, it } from "vitest";
import { fixedWindow, FloodgateError, memoryStore, type RateLimitInfo } from "@floodgate/core";
import type { StoreEvents } from "@floodgate/core/http";
import { ATTRIBUTES as A, floodgateTelemetry, METRICS } from "@floodgate/opentelemetry";
import { hono } from "../http/targets.ts";
import { createSdk } from "./sdk.ts";

const policy = fixedWindow({ limit: 1, window: "1h", name: "hourly" });

describe("options", () => {
  it.each([
    [{ meterProvider: {} }, "meterProvider"],
    [{ tracerProvider: 1 }, "tracerProvider"],
    [{ keyAttribute: "plan" }, "keyAttribute"],
    [{ storeSpans: "yes" }, "storeSpans"],
    [{ meter: {} }, "unknown option `meter`"],
  ])("%o is refused, naming %s", (options, named) => {
    expect(() => floodgateTelemetry(options as never)).toThrow(FloodgateError);
    expect(() => floodgateTelemetry(options as never)).toThrow(named);
  });

  it("instrumentStore refuses what is not a store", () => {
    expect(() => floodgateTelemetry().instrumentStore({} as never)).toThrow(/expected a store/);
  });
});

describe("composition", () => {
  it("the app's onDecision and storeEvents still run, after the telemetry's", async () => {
    const sdk = createSdk();
    const telemetry = floodgateTelemetry({ meterProvider: sdk.meterProvider });
    const seen: RateLimitInfo[] = [];
    const options = telemetry.instrument({ store: memoryStore(), policy, onDecision: (info) => void seen.push(info), storeEvents: {} });
    const app = await hono.start(options);
    await app.send("/api/x");
    await app.send("/api/x");
    expect(seen.map((i) => i.allowed)).toEqual([true, false]);
    expect(await sdk.sum(METRICS.decisions)).toBe(2);
    expect(typeof (options.storeEvents as StoreEvents).circuitOpened).toBe("function");
  });

  it("the key is an attribute only through keyAttribute, as its bounded group", async () => {
    const sdk = createSdk();
    const telemetry = floodgateTelemetry({
      meterProvider: sdk.meterProvider,
      keyAttribute: (key) => (key.startsWith("pro-") ? "pro" : "free"),
    });
    const app = await hono.start(telemetry.instrument({ store: memoryStore(), policy, key: (req) => req.header("x-user") }));
    for (const user of ["pro-1", "pro-2", "free-1", "pro-1"]) await app.send("/api/x", { headers: { "x-user": user } });
    expect(await sdk.sum(METRICS.decisions, { [A.keyGroup]: "pro", [A.outcome]: "allowed" })).toBe(2);
    expect(await sdk.sum(METRICS.decisions, { [A.keyGroup]: "pro", [A.outcome]: "limited" })).toBe(1);
    expect(await sdk.sum(METRICS.decisions, { [A.keyGroup]: "free" })).toBe(1);
    const values = (await sdk.points(METRICS.decisions)).flatMap((p) => Object.values(p.attributes));
    for (const key of ["pro-1", "pro-2", "free-1"]) expect(values).not.toContain(key);
  });

  it("with no SDK registered, requests are decided as without it", async () => {
    const plain = await hono.start({ store: memoryStore(), policy });
    const instrumented = await hono.start(floodgateTelemetry().instrument({ store: memoryStore(), policy }));
    for (const app of [plain, instrumented]) {
      expect([(await app.send("/api/x")).status, (await app.send("/api/x")).status]).toEqual([200, 429]);
    }
  });
});
