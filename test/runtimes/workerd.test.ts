// Cloudflare workerd (through miniflare): Worker bundles built by esbuild from the packages' dist,
// real requests through `mf.dispatchFetch`, the Upstash store reached over fetch() from inside
// workerd to the local bridge on 127.0.0.1. Fails (never skips) when miniflare/workerd is missing.
//   npx vitest run test/runtimes/workerd.test.ts
import type { Miniflare } from "miniflare";
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { type BridgeFixture, bundle, requireBinary, requireBuilt, requirePackage, startBridge } from "./support.ts";
import { CALENDAR_CASES, checkCalendarCase } from "./calendar-cases.ts";

const WORKERD_CONDITIONS = ["workerd", "worker", "browser", "import", "default"];
const COMPATIBILITY_DATE = "2025-09-01";

let MiniflareClass: typeof Miniflare;
const started: Miniflare[] = [];
let fixture: BridgeFixture | undefined;

async function startWorker(script: string, bindings: Record<string, string> = {}): Promise<Miniflare> {
  const mf = new MiniflareClass({ modules: true, script, compatibilityDate: COMPATIBILITY_DATE, bindings });
  started.push(mf);
  await mf.ready;
  return mf;
}

const from = (ip: string): { headers: Record<string, string> } => ({ headers: { "cf-connecting-ip": ip } });

// A missing runtime or build fails every test (a failing beforeAll would only mark them skipped).
let setupError: unknown;
beforeAll(async () => {
  try {
    requireBinary("workerd", "miniflare");
    MiniflareClass = (await requirePackage("miniflare", () => import("miniflare"))).Miniflare;
    requireBuilt(["core", "hono"]);
    fixture = await startBridge();
  } catch (error) {
    setupError = error;
  }
});
beforeEach(() => {
  if (setupError !== undefined) throw setupError;
});

afterAll(async () => {
  for (const mf of started.splice(0)) await mf.dispose();
  await fixture?.stop();
});

describe("workerd: Hono + @floodgate/hono + upstashStore (through the local bridge)", () => {
  let mf: Miniflare;
  let inputs: string[];
  beforeAll(async () => {
    if (setupError !== undefined) return;
    const built = await bundle("test/runtimes/workers/hono-upstash.ts", {
      format: "esm",
      conditions: WORKERD_CONDITIONS,
      define: { __BRIDGE_URL__: JSON.stringify(fixture!.bridge.url), __BRIDGE_TOKEN__: JSON.stringify(fixture!.bridge.token) },
    });
    inputs = built.inputs;
    mf = await startWorker(built.code);
  });

  it("is bundled from the packages' dist, with the Cloudflare entry of @upstash/redis and no node:* import", () => {
    expect(inputs).toContain("packages/core/dist/index.js");
    expect(inputs).toContain("packages/hono/dist/index.js");
    expect(inputs.some((f) => f.startsWith("packages/") && f.includes("/src/"))).toBe(false);
    expect(inputs.some((f) => f.startsWith("node_modules/@upstash/redis/cloudflare"))).toBe(true);
    expect(inputs.some((f) => f.startsWith("node:"))).toBe(false);
  });

  it("workerd can reach the bridge on 127.0.0.1 over fetch (outbound from the Worker)", async () => {
    fixture!.bridge.resetCounters();
    const response = await mf.dispatchFetch("http://worker.test/api/hello", from("198.51.100.1"));
    expect(response.status).toBe(200);
    await response.text();
    expect(fixture!.bridge.requests.total).toBeGreaterThan(0);
  });

  it("allows up to the limit with headers, then denies with 429 and Retry-After; others unaffected", async () => {
    const ip = "203.0.113.10";
    const statuses: number[] = [];
    const remaining: (string | null)[] = [];
    for (let i = 0; i < 3; i++) {
      const response = await mf.dispatchFetch("http://worker.test/api/hello", from(ip));
      statuses.push(response.status);
      remaining.push(response.headers.get("x-ratelimit-remaining"));
      expect(response.headers.get("x-ratelimit-limit")).toBe("3");
      expect(response.headers.get("ratelimit-policy")).toBe('"api";q=3;w=3600');
      expect(response.headers.get("ratelimit")).toMatch(/^"api";r=\d+;t=\d+$/);
      expect(await response.json()).toEqual({ hello: "workerd", remaining: 2 - i });
    }
    expect(statuses).toEqual([200, 200, 200]);
    expect(remaining).toEqual(["2", "1", "0"]);

    const denied = await mf.dispatchFetch("http://worker.test/api/hello", from(ip));
    expect(denied.status).toBe(429);
    expect(Number(denied.headers.get("retry-after"))).toBeGreaterThan(1000); // one token per 1200 s
    expect(denied.headers.get("x-ratelimit-remaining")).toBe("0");
    await denied.text();
    const again = await mf.dispatchFetch("http://worker.test/api/hello", from(ip));
    expect(again.status).toBe(429);
    await again.text();

    const other = await mf.dispatchFetch("http://worker.test/api/hello", from("203.0.113.11"));
    expect(other.status).toBe(200);
    await other.text();
  });

  it("the state lives in Redis: a second isolate sharing the bridge sees the same counters", async () => {
    const built = await bundle("test/runtimes/workers/hono-upstash.ts", {
      format: "esm",
      conditions: WORKERD_CONDITIONS,
      define: { __BRIDGE_URL__: JSON.stringify(fixture!.bridge.url), __BRIDGE_TOKEN__: JSON.stringify(fixture!.bridge.token) },
    });
    const second = await startWorker(built.code);
    const ip = "203.0.113.20";
    for (let i = 0; i < 3; i++) expect((await mf.dispatchFetch("http://worker.test/api/hello", from(ip))).status).toBe(200);
    const response = await second.dispatchFetch("http://worker.test/api/hello", from(ip));
    expect(response.status).toBe(429);
    await response.text();
  });

  it("made no timer, fetch or random-value call at global scope", async () => {
    const response = await mf.dispatchFetch("http://worker.test/__global-scope");
    expect(await response.json()).toEqual({ calls: [] });
  });
});

describe("workerd: memory store created at global scope, fetch wrapper", () => {
  let mf: Miniflare;
  beforeAll(async () => {
    if (setupError !== undefined) return;
    const built = await bundle("test/runtimes/workers/memory.ts", {
      format: "esm",
      conditions: WORKERD_CONDITIONS,
      define: { __MISBEHAVE__: "false" },
    });
    expect(built.inputs).toContain("packages/core/dist/index.js");
    mf = await startWorker(built.code);
  });

  it("keeps state across requests in the isolate: allows 2, then 429 with headers", async () => {
    const ip = "192.0.2.1";
    const first = await mf.dispatchFetch("http://worker.test/a", from(ip));
    expect(first.status).toBe(200);
    expect(first.headers.get("x-ratelimit-limit")).toBe("2");
    expect(first.headers.get("x-ratelimit-remaining")).toBe("1");
    expect(await first.json()).toEqual({ hello: "workerd", path: "/a" });
    const second = await mf.dispatchFetch("http://worker.test/b", from(ip));
    expect(second.status).toBe(200);
    expect(second.headers.get("x-ratelimit-remaining")).toBe("0");
    await second.text();
    const third = await mf.dispatchFetch("http://worker.test/c", from(ip));
    expect(third.status).toBe(429);
    expect(third.headers.get("retry-after")).toMatch(/^\d+$/);
    expect(third.headers.get("ratelimit-policy")).toBe('"global";q=2;w=3600');
    await third.text();
    const other = await mf.dispatchFetch("http://worker.test/a", from("192.0.2.2"));
    expect(other.status).toBe(200);
    await other.text();
  });

  it("made no timer, fetch or random-value call at global scope", async () => {
    const response = await mf.dispatchFetch("http://worker.test/__global-scope");
    expect(await response.json()).toEqual({ calls: [] });
  });

  it("negative control: a timer started at global scope is caught (workerd refuses it)", async () => {
    const built = await bundle("test/runtimes/workers/memory.ts", {
      format: "esm",
      conditions: WORKERD_CONDITIONS,
      define: { __MISBEHAVE__: "true" },
    });
    let log = "";
    const collect = (stream: NodeJS.ReadableStream): void => {
      stream.on("data", (chunk: Buffer) => {
        log += chunk.toString();
      });
    };
    const bad = new MiniflareClass({
      modules: true,
      script: built.code,
      compatibilityDate: COMPATIBILITY_DATE,
      handleRuntimeStdio: (stdout: NodeJS.ReadableStream, stderr: NodeJS.ReadableStream) => {
        collect(stdout);
        collect(stderr);
      },
    });
    let outcome: string;
    try {
      await bad.ready;
      const response = await bad.dispatchFetch("http://worker.test/__global-scope");
      outcome = `${response.status} ${await response.text()}`;
    } catch (error) {
      outcome = String(error);
    } finally {
      await bad.dispose().catch(() => undefined);
    }
    // workerd refuses the script at startup, naming the disallowed operation at global scope.
    expect(outcome).toMatch(/failed to start/);
    expect(log).toMatch(/Disallowed operation called within global scope/);
  });
});

describe("workerd: a cost settled after a streamed response, handed to the ExecutionContext's waitUntil", () => {
  let mf: Miniflare;
  beforeAll(async () => {
    if (setupError !== undefined) return;
    const built = await bundle("test/runtimes/workers/settle-upstash.ts", {
      format: "esm",
      conditions: WORKERD_CONDITIONS,
      define: { __BRIDGE_URL__: JSON.stringify(fixture!.bridge.url), __BRIDGE_TOKEN__: JSON.stringify(fixture!.bridge.token) },
    });
    mf = await startWorker(built.code);
  });

  for (const via of ["hono", "fetch"] as const) {
    it(`${via}: the estimate reserved, the reported units settled once the body has been sent`, async () => {
      const { createRateLimiter, fixedWindow, upstashStore } = await import("../../packages/core/src/index.ts");
      const { Redis } = await import("@upstash/redis");
      const peeker = createRateLimiter({
        policy: fixedWindow({ limit: 1000, window: "1h", name: "tokens" }),
        store: upstashStore({ redis: new Redis({ url: fixture!.bridge.url, token: fixture!.bridge.token, enableTelemetry: false }) }),
        prefix: `wk:${via}:`,
      });
      const before = (await (await mf.dispatchFetch("http://worker.test/__handed")).json() as { handed: number }).handed;
      const response = await mf.dispatchFetch(`http://worker.test/${via}/stream`, from("203.0.113.50"));
      expect(response.status).toBe(200);
      expect(response.headers.get("x-ratelimit-remaining")).toBe("900"); // the estimate held
      expect(await response.text()).toBe("chunk 1\nchunk 2\nchunk 3\n");
      const after = (await (await mf.dispatchFetch("http://worker.test/__handed")).json() as { handed: number }).handed;
      expect(after - before).toBe(1);
      await vi.waitFor(async () => expect((await peeker.peek("worker-key")).remaining).toBe(997), { timeout: 5000 });
    });
  }
});

describe("workerd: calendar windows decided with workerd's Intl, on a memory store and on the Durable Object store", () => {
  let mf: Miniflare;
  beforeAll(async () => {
    if (setupError !== undefined) return;
    requireBuilt(["core", "cloudflare"]);
    const built = await bundle("test/runtimes/workers/calendar.ts", {
      format: "esm",
      conditions: WORKERD_CONDITIONS,
      external: ["cloudflare:workers"],
    });
    expect(built.inputs).toContain("packages/core/dist/index.js");
    expect(built.inputs).toContain("packages/cloudflare/dist/index.js");
    mf = new MiniflareClass({
      modules: true,
      script: built.code,
      compatibilityDate: COMPATIBILITY_DATE,
      durableObjects: { RATE_LIMITER: { className: "RateLimiterObject", useSQLite: true } },
    });
    started.push(mf);
    await mf.ready;
  });

  for (const store of ["memory", "durable-object"] as const) {
    for (const c of CALENDAR_CASES) {
      it(`${store}: ${c.name}`, async () => {
        await checkCalendarCase(
          c,
          (query) => mf.dispatchFetch(`http://worker.test/calendar/${store}?${query}`) as unknown as Promise<Response>,
        );
      });
    }
  }
});
