// A real browser: core's built ESM output bundled by esbuild into one classic script (as a user's
// bundler would, with the "browser" condition), served by a local HTTP server on 127.0.0.1 and
// run in headless Chromium (Debian's `chromium`, driven by playwright-core). Each scenario runs in
// the page; its figures come back through `page.evaluate` and are asserted here. The Upstash store
// runs from the page too, over fetch to the local bridge (a private redis-server behind it), which
// answers CORS for the page's origin only because this suite turns on its `corsOrigin` option.
// Fails (never skips) when Chromium is missing: `apt-get install -y chromium`.
//   npx vitest run test/runtimes/browser.test.ts
import http from "node:http";
import type { AddressInfo } from "node:net";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { type RedisInstance, startRedis } from "../support/redis-server.ts";
import { startUpstashBridge, type UpstashBridge } from "@floodgate/upstash-local";
import { bundle, CHROMIUM_MISSING, requireBuilt, requireChromium, requirePackage } from "./support.ts";

const BROWSER_CONDITIONS = ["browser", "import", "default"];
const CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"];
/** The page scripts' T0 (see browser/page.ts). */
const T0 = 1_700_000_000_000;

interface Served {
  url: string;
  /** Paths requested so far. */
  requests: string[];
  close(): Promise<void>;
}

/** A static HTTP server on a free loopback port: path → [content type, body]. */
async function serve(files: Record<string, [string, string]>): Promise<Served> {
  const requests: string[] = [];
  const server = http.createServer((req, res) => {
    const path = new URL(req.url ?? "/", "http://127.0.0.1").pathname;
    requests.push(path);
    const file = files[path];
    if (path === "/favicon.ico") {
      res.writeHead(204).end();
      return;
    }
    if (file === undefined) {
      res.writeHead(404, { "content-type": "text/plain" }).end("not found");
      return;
    }
    res.writeHead(200, { "content-type": file[0], "cache-control": "no-store" }).end(file[1]);
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen({ host: "127.0.0.1", port: 0 }, resolve);
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const html = (script: string): string =>
  `<!doctype html><html><head><meta charset="utf-8"><title>floodgate</title></head><body><script src="${script}"></script></body></html>`;

let browser: Browser | undefined;
let server: Served | undefined;
let redis: RedisInstance | undefined;
let bridge: UpstashBridge | undefined;
let page: Page;
let inputs: string[];
let code: string;
const pageErrors: string[] = [];
const consoleMessages: string[] = [];

// A missing browser or build fails every test (a failing beforeAll would only mark them skipped).
let setupError: unknown;
beforeAll(async () => {
  try {
    const executablePath = requireChromium();
    const { chromium } = await requirePackage("playwright-core", () => import("playwright-core"));
    requireBuilt(["core"]);
    const build = (misbehave: boolean): ReturnType<typeof bundle> =>
      bundle("test/runtimes/browser/page.ts", {
        format: "iife",
        conditions: BROWSER_CONDITIONS,
        define: { __MISBEHAVE__: String(misbehave) },
      });
    const [good, bad] = await Promise.all([build(false), build(true)]);
    ({ inputs, code } = good);
    server = await serve({
      "/": ["text/html; charset=utf-8", html("/floodgate.js")],
      "/floodgate.js": ["text/javascript; charset=utf-8", good.code],
      "/misbehave.html": ["text/html; charset=utf-8", html("/misbehave.js")],
      "/misbehave.js": ["text/javascript; charset=utf-8", bad.code],
    });
    // The Upstash bridge answers CORS for the page's origin only (an option off by default).
    redis = await startRedis();
    bridge = await startUpstashBridge({ redis: { host: redis.host, port: redis.port }, corsOrigin: server.url });
    browser = await chromium.launch({ executablePath, headless: true, args: CHROMIUM_ARGS });
    page = await browser.newPage();
    page.on("pageerror", (error) => pageErrors.push(String(error)));
    page.on("console", (message) => consoleMessages.push(`${message.type()}: ${message.text()}`));
    await page.goto(`${server.url}/`, { waitUntil: "load" });
  } catch (error) {
    setupError = error;
  }
});
beforeEach(() => {
  if (setupError !== undefined) throw setupError;
});
afterAll(async () => {
  await browser?.close();
  await server?.close();
  await bridge?.stop();
  await redis?.stop();
});

/** Runs a scenario of browser/page.ts in the page and returns its figures. */
const run = (name: string, argument?: unknown): Promise<any> =>
  page.evaluate(`floodgateBrowser.run(${JSON.stringify(name)}, ${JSON.stringify(argument ?? null)})`);

describe("browser (headless Chromium): @floodgate/core from its dist, bundled for the browser", () => {
  it("the page loaded one classic script, bundled from core's dist with no node:* import, over HTTP", async () => {
    expect(inputs).toContain("packages/core/dist/index.js");
    expect(inputs.some((f) => f.startsWith("packages/") && f.includes("/src/"))).toBe(false);
    expect(inputs.some((f) => f.startsWith("node:"))).toBe(false);
    expect(code).not.toMatch(/^\s*(import|export)\s/m);
    expect(server!.requests).toEqual(expect.arrayContaining(["/", "/floodgate.js"]));
    expect(await page.evaluate("typeof floodgateBrowser.run")).toBe("function");
    expect(await page.evaluate("navigator.userAgent")).toMatch(/HeadlessChrome\/\d+/);
    // A real browser global scope: no Node globals for the bundle to lean on.
    expect(await page.evaluate("[typeof process, typeof Buffer, typeof require, typeof window, typeof document]")).toEqual([
      "undefined",
      "undefined",
      "undefined",
      "object",
      "object",
    ]);
    expect(pageErrors).toEqual([]);
  });

  it("importing the module started no timer and made no fetch or random-value call", async () => {
    expect(await page.evaluate("floodgateBrowser.globalScopeCalls")).toEqual([]);
  });

  it("negative control: a timer started at the page's global scope is caught", async () => {
    const other = await browser!.newPage();
    try {
      await other.goto(`${server!.url}/misbehave.html`, { waitUntil: "load" });
      expect(await other.evaluate("floodgateBrowser.globalScopeCalls")).toEqual(["setTimeout"]);
    } finally {
      await other.close();
    }
  });

  // Each algorithm: limit 3 per second (the token bucket: capacity 3, 3 tokens per second).
  // The exact waits after 3 admissions at T0 (a window start): one token refills in 333.3 ms; the
  // sliding-window counter needs the next window plus 3 * (1 - e / 1000) + 1 <= 3, so e >= 333.3 ms.
  const EXACT_WAIT: Record<string, number> = { tokenBucket: 334, slidingWindow: 1334, fixedWindow: 1000, slidingLog: 1000 };
  const NAMES: Record<string, string> = { tokenBucket: "tb", slidingWindow: "sw", fixedWindow: "fw", slidingLog: "sl" };
  for (const kind of Object.keys(EXACT_WAIT)) {
    it(`${kind} on the memory store, injected clock: admits exactly the limit, denies with retryAfterMs, peek, refund, reset`, async () => {
      const r = await run(kind);
      expect(r.admitted.map((d: { allowed: boolean; remaining: number }) => [d.allowed, d.remaining])).toEqual([[true, 2], [true, 1], [
        true,
        0,
      ]]);
      for (const d of r.admitted) {
        expect(d).toMatchObject({ limit: 3, retryAfterMs: 0, policy: NAMES[kind] });
      }
      expect(r.denied).toMatchObject({ allowed: false, remaining: 0, limit: 3, policy: NAMES[kind], retryAfterMs: EXACT_WAIT[kind] });
      // The denial charged nothing, and the wait is exact: 1 ms earlier is still denied.
      expect(r.peekAfterDeny).toMatchObject({ allowed: false, remaining: 0, retryAfterMs: EXACT_WAIT[kind] });
      expect(r.justBefore).toMatchObject({ allowed: false });
      expect(r.atRetry).toMatchObject({ allowed: true, retryAfterMs: 0 });
      // peek charges nothing.
      expect(r.peekFresh).toMatchObject({ allowed: true, remaining: 3, limit: 3, retryAfterMs: 0 });
      expect(r.peekAgain).toEqual(r.peekFresh);
      expect(r.fullB).toMatchObject({ allowed: false, remaining: 0 });
      // refund gives one unit back, which the next request uses.
      expect(r.afterRefund).toMatchObject({ allowed: true, remaining: 1 });
      expect(r.usesRefund).toMatchObject({ allowed: true, remaining: 0 });
      expect(r.afterRefundUsed).toMatchObject({ allowed: false, retryAfterMs: EXACT_WAIT[kind] });
      // reset clears exactly that key.
      expect(r.resetC).toMatchObject({ allowed: true, remaining: 3 });
      expect(r.untouchedD).toMatchObject({ allowed: true, remaining: 2 });
    });
  }

  it("fixed window's resetAt is the end of the window aligned to the epoch", async () => {
    const r = await run("fixedWindow");
    expect(r.denied.resetAt).toBe(T0 + 1000);
  });

  it("several policies in one atomic step: a denial by one charges none; a cost over a limit is denied with Infinity", async () => {
    const r = await run("multiPolicy");
    const byName = (d: { policies: { policy: string; remaining: number; allowed: boolean }[] }): Record<string, [boolean, number]> =>
      Object.fromEntries(d.policies.map((p) => [p.policy, [p.allowed, p.remaining]]));
    expect(r.first).toMatchObject({ allowed: true, policy: "minute", remaining: 1 });
    expect(byName(r.first)).toEqual({ second: [true, 3], minute: [true, 1] });
    expect(r.denied).toMatchObject({ allowed: false, policy: "minute", remaining: 1 });
    expect(r.denied.retryAfterMs).toBeGreaterThan(0);
    // Neither policy was charged by the denial.
    expect(byName(r.after)).toEqual({ second: [true, 3], minute: [true, 1] });
    expect(r.tooBig).toMatchObject({ allowed: false, policy: "second", retryAfterMs: Infinity });
    expect(r.fits).toMatchObject({ allowed: true, remaining: 0, policy: "minute" });
    expect(byName(r.fits)).toEqual({ second: [true, 2], minute: [true, 0] });
    expect(r.last).toMatchObject({ allowed: false, policy: "minute" });
    expect(byName(r.last)).toEqual({ second: [true, 2], minute: [false, 0] });
  });

  it("bad options and bad calls throw FloodgateError with a stable code, naming what was wrong, and change no state", async () => {
    const { errors, after } = await run("badInput");
    const expected: Record<string, [string, RegExp]> = {
      negativeCapacity: ["INVALID_OPTION", /capacity/],
      zeroWindow: ["INVALID_OPTION", /window/],
      unparsableDuration: ["INVALID_OPTION", /"soon"/],
      unknownOption: ["INVALID_OPTION", /windowMS/],
      nanLimit: ["INVALID_OPTION", /limit.*NaN|NaN.*limit/],
      emptyKey: ["INVALID_ARGUMENT", /key/],
      nonStringKey: ["INVALID_ARGUMENT", /key/],
      zeroCost: ["INVALID_ARGUMENT", /cost/],
      fractionalCost: ["INVALID_ARGUMENT", /cost/],
      infiniteCost: ["INVALID_ARGUMENT", /cost/],
    };
    for (const [name, [code, message]] of Object.entries(expected)) {
      expect(errors[name], name).toMatchObject({ name: "FloodgateError", code, isFloodgateError: true, isError: true });
      expect(errors[name].message, name).toMatch(message);
    }
    expect(after).toMatchObject({ allowed: true, remaining: 1, limit: 2 });
  });

  it("withRateLimit wraps a (Request) => Response handler: headers, then 429 with Retry-After and the default body", async () => {
    const r = await run("fetchWrapper");
    expect(r.requestIsNative).toBe(true);
    const [first, second, third] = r.responses;
    for (const [i, response] of [first, second].entries()) {
      expect(response).toMatchObject({ isResponse: true, status: 200 });
      expect(JSON.parse(response.body)).toEqual({ hello: "browser", path: `/api/${i}` });
      expect(response.headers["x-ratelimit-limit"]).toBe("2");
      expect(response.headers["x-ratelimit-remaining"]).toBe(String(1 - i));
      expect(response.headers["ratelimit-policy"]).toBe('"page";q=2;w=3600');
    }
    expect(third).toMatchObject({ isResponse: true, status: 429 });
    // One token per 1800 s, on the injected clock.
    expect(third.headers["retry-after"]).toBe("1800");
    expect(third.headers["x-ratelimit-remaining"]).toBe("0");
    expect(third.headers["content-type"]).toMatch(/^application\/json/);
    expect(JSON.parse(third.body)).toEqual({
      error: { code: "RATE_LIMITED", message: "Too many requests. Please retry after the Retry-After period.", retryAfter: 1800 },
    });
    // The denied request never reached the handler; another client is unaffected.
    expect(r.handlerCalls).toBe(3);
    expect(r.other).toMatchObject({ status: 200 });
    expect(JSON.parse(r.other.body)).toEqual({ hello: "browser", path: "/api/other" });
  });

  it("the Upstash store from the page: @upstash/redis over fetch (CORS) to the local bridge, on real Redis", async () => {
    expect(inputs.some((f) => f.startsWith("node_modules/@upstash/redis/cloudflare"))).toBe(true);
    bridge!.resetCounters();
    const r = await run("upstash", { url: bridge!.url, token: bridge!.token, prefix: "browser:" });
    expect(r.decisions.map((d: { allowed: boolean; remaining: number }) => [d.allowed, d.remaining])).toEqual([[true, 2], [true, 1], [
      true,
      0,
    ], [false, 0]]);
    expect(r.decisions[3]).toMatchObject({ policy: "upstash-log", limit: 3 });
    // The log's oldest entry leaves an hour after it was made, on the server's clock.
    expect(r.decisions[3].retryAfterMs).toBeGreaterThan(3_590_000);
    expect(r.decisions[3].retryAfterMs).toBeLessThanOrEqual(3_600_000);
    expect(r.peek).toMatchObject({ allowed: false, remaining: 0 });
    expect(r.afterReset).toMatchObject({ allowed: true, remaining: 3 });
    expect(r.statuses).toEqual([200, 429]);
    expect(r.retryAfter).toBe("3600");
    // Every decision was an HTTP round trip from the page to the bridge.
    expect(bridge!.requests.total).toBeGreaterThanOrEqual(8);
    expect(Object.keys(bridge!.requests.byPath).every((p) => !p.startsWith("outside:"))).toBe(true);
  });

  it("the page logged no error and threw nothing", () => {
    expect(pageErrors).toEqual([]);
    expect(consoleMessages.filter((m) => m.startsWith("error"))).toEqual([]);
  });
});

describe("browser: a missing Chromium fails with how to install it", () => {
  it("requireChromium throws CHROMIUM_MISSING when chromium is not on PATH", () => {
    const saved = process.env["PATH"];
    process.env["PATH"] = "/nonexistent-floodgate-path";
    try {
      expect(() => requireChromium()).toThrow(CHROMIUM_MISSING);
    } finally {
      process.env["PATH"] = saved;
    }
    expect(CHROMIUM_MISSING).toMatch(/apt-get install -y chromium/);
  });
});
