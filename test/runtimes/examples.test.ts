// The runtime examples, each on its real runtime: examples/deno (deno binary), examples/bun (bun
// binary), each started on a free port; examples/cloudflare-worker bundled with esbuild from the
// packages' dist and run on workerd (miniflare), on memory and on Upstash through the local bridge.
// Fails (never skips) when a runtime is missing.
//   npx vitest run test/runtimes/examples.test.ts
import { type ChildProcess, spawn } from "node:child_process";
import type { Miniflare } from "miniflare";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type BridgeFixture, bundle, requireBinary, requireBuilt, requirePackage, ROOT, startBridge } from "./support.ts";

const children: ChildProcess[] = [];
afterEach(async () => {
  for (const child of children.splice(0)) {
    if (child.exitCode !== null || child.signalCode !== null) continue;
    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.kill("SIGTERM"); // by its pid: only processes this suite started
    await exited;
  }
});

/** Starts an example with PORT=0 and resolves with the address it prints. */
async function start(command: string, args: string[], banner: RegExp): Promise<{ base: string; output: () => string }> {
  const env: NodeJS.ProcessEnv = { ...process.env, PORT: "0", NO_COLOR: "1" };
  const child = spawn(command, args, { cwd: ROOT, env, stdio: ["ignore", "pipe", "pipe"] });
  children.push(child);
  let output = "";
  const base = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no "listening on" line within 20 s:\n${output}`)), 20_000);
    child.stdout!.on("data", (chunk: Buffer) => {
      output += chunk.toString();
      const match = banner.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]!);
      }
    });
    child.stderr!.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`${command} ${args.join(" ")} exited with ${code}:\n${output}`));
    });
  });
  return { base, output: () => output };
}

/** Sends requests until the first 429 (at most `max`), checking the headers on the way. */
async function expectLimitedAfter(limit: number, url: string, body: unknown): Promise<Response> {
  for (let i = 0; i < limit; i++) {
    const response = await fetch(url);
    expect(response.status, `request ${i + 1}`).toBe(200);
    expect(response.headers.get("x-ratelimit-limit")).toBe(String(limit));
    expect(response.headers.get("x-ratelimit-remaining")).toBe(String(limit - 1 - i));
    expect(await response.json()).toEqual(typeof body === "function" ? body(i) : body);
  }
  const denied = await fetch(url);
  expect(denied.status).toBe(429);
  expect(denied.headers.get("retry-after")).toMatch(/^\d+$/);
  expect(denied.headers.get("ratelimit-policy")).toBe('"5-per-1m";q=5;w=60');
  await denied.text();
  return denied;
}

describe("examples/deno (Deno.serve)", () => {
  it("fetch.ts: withRateLimit, the client address from info.remoteAddr; 5 per minute then 429", async () => {
    const deno = requireBinary("deno");
    const { base } = await start(
      deno,
      ["run", "--allow-net", "--allow-env=PORT", "examples/deno/fetch.ts"],
      /listening on (http:\/\/127\.0\.0\.1:\d+)/,
    );
    await expectLimitedAfter(5, `${base}/hello`, { hello: "deno", path: "/hello" });
  });

  it("hono.ts: Hono + @floodgate/hono with hono/deno's getConnInfo; 5 per minute then 429", async () => {
    const deno = requireBinary("deno");
    const { base } = await start(
      deno,
      ["run", "--allow-net", "--allow-env=PORT", "examples/deno/hono.ts"],
      /listening on (http:\/\/127\.0\.0\.1:\d+)/,
    );
    await expectLimitedAfter(5, `${base}/api/hello`, (i: number) => ({ hello: "deno + hono", remaining: 4 - i }));
  });
});

describe("examples/bun (Bun.serve)", () => {
  it("server.ts: withRateLimit, the client address from server.requestIP; 5 per minute then 429", async () => {
    const bun = requireBinary("bun");
    const { base } = await start(bun, ["examples/bun/server.ts"], /listening on (http:\/\/127\.0\.0\.1:\d+)/);
    await expectLimitedAfter(5, `${base}/`, { hello: "bun", path: "/" });
  });
});

describe("examples/cloudflare-worker (workerd via miniflare)", () => {
  let MiniflareClass: typeof Miniflare;
  let fixture: BridgeFixture | undefined;
  let code: string;
  const workers: Miniflare[] = [];
  let setupError: unknown;
  beforeAll(async () => {
    try {
      requireBinary("workerd", "miniflare");
      MiniflareClass = (await requirePackage("miniflare", () => import("miniflare"))).Miniflare;
      requireBuilt(["core", "hono"]);
      const built = await bundle("examples/cloudflare-worker/src/index.ts", {
        format: "esm",
        conditions: ["workerd", "worker", "browser", "import", "default"],
      });
      expect(built.inputs).toContain("packages/hono/dist/index.js");
      code = built.code;
      fixture = await startBridge();
    } catch (error) {
      setupError = error;
    }
  });
  afterAll(async () => {
    for (const mf of workers.splice(0)) await mf.dispose();
    await fixture?.stop();
  });

  async function worker(bindings: Record<string, string>): Promise<Miniflare> {
    if (setupError !== undefined) throw setupError;
    const mf = new MiniflareClass({ modules: true, script: code, compatibilityDate: "2025-09-01", bindings });
    workers.push(mf);
    await mf.ready;
    return mf;
  }

  async function limitedAfterFive(mf: Miniflare, ip: string, store: string): Promise<void> {
    for (let i = 0; i < 5; i++) {
      const response = await mf.dispatchFetch("http://worker.test/", { headers: { "cf-connecting-ip": ip } });
      expect(response.status).toBe(200);
      expect(response.headers.get("x-ratelimit-remaining")).toBe(String(4 - i));
      expect(await response.json()).toEqual({ hello: "worker", store });
    }
    const denied = await mf.dispatchFetch("http://worker.test/", { headers: { "cf-connecting-ip": ip } });
    expect(denied.status).toBe(429);
    expect(denied.headers.get("ratelimit-policy")).toBe('"5-per-1m";q=5;w=60');
    await denied.text();
    const other = await mf.dispatchFetch("http://worker.test/", { headers: { "cf-connecting-ip": `${ip}9` } });
    expect(other.status).toBe(200);
    await other.text();
  }

  it("without Upstash settings: the memory store made at global scope", async () => {
    const mf = await worker({});
    await limitedAfterFive(mf, "198.51.100.7", "memory");
  });

  it("with UPSTASH_REDIS_REST_URL/TOKEN: the Upstash store, through the bridge", async () => {
    const mf = await worker({ UPSTASH_REDIS_REST_URL: fixture!.bridge.url, UPSTASH_REDIS_REST_TOKEN: fixture!.bridge.token });
    fixture!.bridge.resetCounters();
    await limitedAfterFive(mf, "198.51.100.8", "upstash");
    expect(fixture!.bridge.requests.total).toBeGreaterThanOrEqual(5);
  });
});
