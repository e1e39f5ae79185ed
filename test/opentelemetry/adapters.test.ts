// @floodgate/opentelemetry through every adapter (Hono, Express 5 and 4, Koa, withRateLimit, the
// Lambda shapes) with the real SDKs: the decisions counter and duration histogram, by rule,
// policy, outcome, source and store; the deny list and skipped requests; the decision on the
// active span.
//   npx vitest run test/opentelemetry
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { context, trace } from "@opentelemetry/api";
import express from "express";
import Koa from "koa";
import { describe, expect, it } from "vitest";
import { rateLimit as expressRateLimit } from "@floodgate/express";
import { rateLimit as koaRateLimit } from "@floodgate/koa";
import { fixedWindow, memoryStore } from "@floodgate/core";
import { ATTRIBUTES as A, floodgateTelemetry, METRICS } from "@floodgate/opentelemetry";
import { TARGETS } from "../http/targets.ts";
import { createSdk } from "./sdk.ts";

const policy = fixedWindow({ limit: 2, window: "1h", name: "per-hour" });
/** Targets that answer in this process, where a span made by the test is the request's active span. */
const IN_PROCESS = new Set(["hono", "fetch"]);

describe.each(TARGETS.map((t) => [t.name, t] as const))("%s", (name, target) => {
  it("counts 2 allowed and 1 limited decision by rule, policy, source and store, with their durations", async () => {
    const sdk = createSdk();
    const telemetry = floodgateTelemetry({ meterProvider: sdk.meterProvider, tracerProvider: sdk.tracerProvider });
    const app = await target.start(telemetry.instrument({ store: memoryStore(), policy, rules: { "GET /api/login": [policy] } }));
    try {
      const statuses = [];
      for (let i = 0; i < 3; i++) statuses.push((await app.send("/api/x")).status);
      expect(statuses).toEqual([200, 200, 429]);
      await app.send("/api/login");
      const base = { [A.rule]: "default", [A.policy]: "per-hour", [A.source]: "store", [A.store]: "memory" };
      expect(await sdk.sum(METRICS.decisions, { ...base, [A.outcome]: "allowed" })).toBe(2);
      expect(await sdk.sum(METRICS.decisions, { ...base, [A.outcome]: "limited" })).toBe(1);
      expect(await sdk.sum(METRICS.decisions, { [A.rule]: "GET /api/login", [A.outcome]: "allowed" })).toBe(1);
      expect(await sdk.sum(METRICS.decisions)).toBe(4);
      // One duration per decision, in seconds, and never the key.
      expect(await sdk.sum(METRICS.decisionDuration)).toBe(4);
      for (const p of await sdk.points(METRICS.decisions)) expect(Object.values(p.attributes)).not.toContain("127.0.0.1");
    } finally {
      await app.close();
    }
  });

  it("counts a deny-listed request and a skipped one", async () => {
    const sdk = createSdk();
    const telemetry = floodgateTelemetry({ meterProvider: sdk.meterProvider });
    const denied = await target.start(telemetry.instrument({ store: memoryStore(), policy, denyList: ["127.0.0.1"] }));
    const skipped = await target.start(telemetry.instrument({ store: memoryStore(), policy, skip: () => true }));
    try {
      expect((await denied.send("/api/x")).status).toBe(403);
      expect((await skipped.send("/api/x")).status).toBe(200);
      expect(await sdk.sum(METRICS.decisions, { [A.outcome]: "deny_listed", [A.rule]: "default" })).toBe(1);
      expect(await sdk.sum(METRICS.decisions, { [A.outcome]: "skipped", [A.skipReason]: "skip" })).toBe(1);
      // Nothing was counted for them: no source, no store.
      for (const p of await sdk.points(METRICS.decisions)) expect(p.attributes[A.source]).toBeUndefined();
    } finally {
      await denied.close();
      await skipped.close();
    }
  });

  it.runIf(IN_PROCESS.has(name) || name.startsWith("lambda"))("puts the decision on the active span", async () => {
    const sdk = createSdk();
    const telemetry = floodgateTelemetry({ meterProvider: sdk.meterProvider, tracerProvider: sdk.tracerProvider });
    const app = await target.start(telemetry.instrument({ store: memoryStore(), policy }));
    const tracer = sdk.tracerProvider.getTracer("test");
    try {
      for (let i = 0; i < 3; i++) {
        await tracer.startActiveSpan(`request ${i}`, async (span) => {
          await app.send("/api/x");
          span.end();
        });
      }
      const spans = sdk.spans.getFinishedSpans();
      expect(spans.map((s) => s.name)).toEqual(["request 0", "request 1", "request 2"]);
      expect(spans[0]!.attributes).toMatchObject({
        [A.outcome]: "allowed",
        [A.policy]: "per-hour",
        [A.source]: "store",
        [A.remaining]: 1,
      });
      expect(spans[0]!.attributes[A.retryAfter]).toBe(0);
      expect(spans[2]!.attributes).toMatchObject({ [A.outcome]: "limited", [A.remaining]: 0, [A.rule]: "default" });
      expect(spans[2]!.attributes[A.retryAfter]).toBeGreaterThan(0);
      // The memory store answers in-process: no store span.
      expect(spans.some((s) => s.name.startsWith("floodgate.store."))).toBe(false);
    } finally {
      await app.close();
    }
  });
});

describe("the active span on a real HTTP server", () => {
  // As an HTTP instrumentation does: the request's span is made active for the rest of the chain.
  it("express and koa put the decision on the request's span", async () => {
    const sdk = createSdk();
    const telemetry = floodgateTelemetry({ meterProvider: sdk.meterProvider, tracerProvider: sdk.tracerProvider });
    const tracer = sdk.tracerProvider.getTracer("test");
    const expressApp = express();
    expressApp.use((req, res, next) => {
      const span = tracer.startSpan(`express ${req.path}`);
      res.on("finish", () => span.end());
      context.with(trace.setSpan(context.active(), span), next);
    });
    expressApp.use(expressRateLimit(telemetry.instrument({ store: memoryStore(), policy })));
    expressApp.get("/x", (_req, res) => void res.send("ok"));
    const koaApp = new Koa();
    koaApp.use((ctx, next) =>
      tracer.startActiveSpan(`koa ${ctx.path}`, async (span) => {
        try {
          await next();
        } finally {
          span.end();
        }
      })
    );
    koaApp.use(koaRateLimit(telemetry.instrument({ store: memoryStore(), policy })));
    koaApp.use((ctx) => void (ctx.body = "ok"));
    const servers = [createServer(expressApp), createServer(koaApp.callback())];
    try {
      for (const server of servers) {
        await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
        const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/x`;
        for (let i = 0; i < 3; i++) await (await fetch(url)).text();
      }
      for (const name of ["express /x", "koa /x"]) {
        const spans = sdk.spans.getFinishedSpans().filter((s) => s.name === name);
        expect(spans.map((s) => s.attributes[A.outcome])).toEqual(["allowed", "allowed", "limited"]);
        expect(spans[2]!.attributes).toMatchObject({ [A.policy]: "per-hour", [A.remaining]: 0, [A.source]: "store" });
      }
    } finally {
      for (const server of servers) {
        server.closeAllConnections();
        await new Promise((resolve) => server.close(resolve));
      }
    }
  });
});
