// Vercel's edge runtime (the `edge-runtime` package): a `withRateLimit` handler bundled by esbuild
// into one script with no imports, against the memory store and the Upstash store through the
// local bridge. Fails (never skips) when edge-runtime is missing.
//   npx vitest run test/runtimes/edge-runtime.test.ts
import type { EdgeRuntime } from "edge-runtime";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { type BridgeFixture, bundle, requireBinary, requireBuilt, requirePackage, startBridge } from "./support.ts";
import { CALENDAR_CASES, checkCalendarCase } from "./calendar-cases.ts";

const EDGE_CONDITIONS = ["edge-light", "worker", "browser", "import", "default"];

let EdgeRuntimeClass: typeof EdgeRuntime;
let fixture: BridgeFixture | undefined;
let setupError: unknown;

beforeAll(async () => {
  try {
    requireBinary("edge-runtime");
    EdgeRuntimeClass = (await requirePackage("edge-runtime", () => import("edge-runtime"))).EdgeRuntime;
    requireBuilt(["core"]);
    fixture = await startBridge();
  } catch (error) {
    setupError = error;
  }
});
beforeEach(() => {
  if (setupError !== undefined) throw setupError;
});
afterAll(async () => {
  await fixture?.stop();
});

async function runtimeFor(store: "memory" | "upstash"): Promise<{ runtime: EdgeRuntime; inputs: string[]; code: string }> {
  const { code, inputs } = await bundle("test/runtimes/edge/handler.ts", {
    format: "iife",
    conditions: EDGE_CONDITIONS,
    define: {
      __STORE__: JSON.stringify(store),
      __BRIDGE_URL__: JSON.stringify(fixture!.bridge.url),
      __BRIDGE_TOKEN__: JSON.stringify(fixture!.bridge.token),
    },
  });
  return { runtime: new EdgeRuntimeClass({ initialCode: code }), inputs, code };
}

const from = (ip: string): RequestInit => ({ headers: { "x-real-ip": ip } });

for (const store of ["memory", "upstash"] as const) {
  describe(`edge-runtime: withRateLimit over the ${store} store`, () => {
    let runtime: EdgeRuntime;
    let inputs: string[];
    let code: string;
    beforeAll(async () => {
      if (setupError !== undefined) return;
      ({ runtime, inputs, code } = await runtimeFor(store));
    });

    it("runs one bundled script with no imports, built from core's dist", () => {
      expect(inputs).toContain("packages/core/dist/index.js");
      expect(inputs.some((f) => f.startsWith("packages/") && f.includes("/src/"))).toBe(false);
      expect(code).not.toMatch(/^\s*(import|export)\s/m);
      if (store === "upstash") expect(inputs.some((f) => f.startsWith("node_modules/@upstash/redis"))).toBe(true);
    });

    it("allows up to the limit with headers, then 429 with Retry-After; other clients unaffected", async () => {
      if (store === "upstash") fixture!.bridge.resetCounters();
      const ip = "203.0.113.30";
      for (let i = 0; i < 3; i++) {
        const response = await runtime.dispatchFetch("https://edge.test/hello", from(ip));
        expect(response.status).toBe(200);
        expect(response.headers.get("x-ratelimit-limit")).toBe("3");
        expect(response.headers.get("x-ratelimit-remaining")).toBe(String(2 - i));
        expect(response.headers.get("ratelimit-policy")).toBe('"edge";q=3;w=3600');
        expect(await response.json()).toEqual({ runtime: "edge", store, path: "/hello" });
      }
      const denied = await runtime.dispatchFetch("https://edge.test/hello", from(ip));
      expect(denied.status).toBe(429);
      expect(Number(denied.headers.get("retry-after"))).toBeGreaterThan(1000);
      expect(denied.headers.get("x-ratelimit-remaining")).toBe("0");
      await denied.text();
      const other = await runtime.dispatchFetch("https://edge.test/hello", from("203.0.113.31"));
      expect(other.status).toBe(200);
      await other.text();
      if (store === "upstash") expect(fixture!.bridge.requests.total).toBeGreaterThanOrEqual(4);
    });

    it("a cost settled after the streamed body, through Vercel's request-context waitUntil", async () => {
      const response = await runtime.dispatchFetch("https://edge.test/settle/stream", from("203.0.113.60"));
      expect(response.status).toBe(200);
      expect(response.headers.get("x-ratelimit-remaining")).toBe("900"); // the estimate held
      expect(await response.text()).toBe("chunk 1\nchunk 2\nchunk 3\n");
      // What the runtime waits for after the response: the settlement, handed to event.waitUntil.
      await response.waitUntil();
      const peek = await runtime.dispatchFetch("https://edge.test/settle/peek");
      expect(await peek.json()).toEqual({ remaining: 997, handed: 1 });
    });

    if (store === "memory") {
      for (const c of CALENDAR_CASES) {
        it(`a calendar window decided with the edge runtime's Intl: ${c.name}`, async () => {
          await checkCalendarCase(
            c,
            (query) => runtime.dispatchFetch(`https://edge.test/calendar?${query}`) as unknown as Promise<Response>,
          );
        });
      }
    }

    if (store === "upstash") {
      it("keeps the state in Redis: a fresh runtime (a new edge instance) sees the same counters", async () => {
        const ip = "203.0.113.40";
        for (let i = 0; i < 3; i++) expect((await runtime.dispatchFetch("https://edge.test/x", from(ip))).status).toBe(200);
        const { runtime: fresh } = await runtimeFor("upstash");
        const response = await fresh.dispatchFetch("https://edge.test/x", from(ip));
        expect(response.status).toBe(429);
        await response.text();
      });
    }
  });
}
