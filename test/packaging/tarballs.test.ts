/**
 * Every package as a user gets it: built, `npm pack`ed, installed with `npm ci --offline` into a
 * scratch app in the OS temp directory (outside the repository, so nothing resolves to the
 * workspace), then run there. The app's registry dependencies (the frameworks, TypeScript,
 * @upstash/redis) come from the npm cache at the versions the repository's lockfile pins; the
 * Floodgate packages come from their tarballs only. A file missing from a tarball, a wrong export
 * map or broken type declarations fail here.
 */
import { spawn, type SpawnOptions } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, statSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startRedis } from "../support/redis-server.ts";
import { scratchFiles } from "./scratch-app.ts";
import { scratchLock, type Tarball } from "./scratch-lock.ts";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const PACKAGES = ["core", "hono", "express", "koa", "upstash-local"];
const REGISTRY_DEPENDENCIES = [
  "express",
  "hono",
  "@hono/node-server",
  "koa",
  "@upstash/redis",
  "typescript",
  "@types/node",
  "@types/express",
  "@types/koa",
];
// Once core exports a second entry, the scratch app imports it too.
const CORE_HTTP_ENTRY = "./http" in (JSON.parse(readFileSync(path.join(ROOT, "packages/core/package.json"), "utf8")).exports ?? {});

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function run(command: string, args: string[], options: SpawnOptions & { timeoutMs?: number } = {}): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ["ignore", "pipe", "pipe"], ...options });
    let stdout = "";
    let stderr = "";
    child.stdout!.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
    child.stderr!.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    const timer = setTimeout(() => child.kill("SIGKILL"), options.timeoutMs ?? 60_000);
    child.once("error", reject);
    child.once("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

async function mustRun(command: string, args: string[], options: SpawnOptions & { timeoutMs?: number } = {}): Promise<string> {
  const result = await run(command, args, options);
  if (result.code !== 0) {
    throw new Error(`${command} ${args.join(" ")} exited ${result.code}:\n${result.stdout}\n${result.stderr}`);
  }
  return result.stdout;
}

/** Newest modification time of the files under `paths` (0 when none exists). */
function newestMs(paths: string[]): number {
  let newest = 0;
  for (const p of paths) {
    if (!existsSync(p)) continue;
    const stat = statSync(p);
    if (stat.isDirectory()) newest = Math.max(newest, newestMs(readdirSync(p).map((name) => path.join(p, name))));
    else newest = Math.max(newest, stat.mtimeMs);
  }
  return newest;
}

/** Oldest modification time of the files in `dir` (0 when it is empty or missing). */
function oldestMs(dir: string): number {
  if (!existsSync(dir)) return 0;
  const times = readdirSync(dir).map((name) => statSync(path.join(dir, name)).mtimeMs);
  return times.length === 0 ? 0 : Math.min(...times);
}

/**
 * Make's rule: a package whose dist is older than anything it is built from is rebuilt with its
 * own `npm run build` (`npm test` builds just before, so there this costs nothing).
 */
function stalePackages(): string[] {
  return PACKAGES.filter((pkg) => {
    const dir = path.join(ROOT, "packages", pkg);
    const inputs = ["src", "package.json", "tsup.config.ts", "tsconfig.json"].map((f) => path.join(dir, f));
    inputs.push(path.join(ROOT, "tsup.base.ts"), path.join(ROOT, "tsconfig.json"));
    return oldestMs(path.join(dir, "dist")) < newestMs(inputs);
  });
}

let work: string;
let app: string;
/** Started as soon as the app is installed: the slowest check runs beside the others. */
let typecheck: Promise<Run>;
const packed = new Map<string, { files: string[]; manifest: Tarball["manifest"] & Record<string, unknown> }>();

/** Runs one of the scratch app's scripts with node, in the app, and parses the JSON it printed. */
async function node(file: string, env: Record<string, string> = {}): Promise<any> {
  const result = await run(process.execPath, [file], { cwd: app, env: { ...process.env, ...env }, timeoutMs: 20_000 });
  expect(result.code, `${file}: ${result.stderr}`).toBe(0);
  return JSON.parse(result.stdout);
}

/** Two requests through, the third limited: a 429 carrying Retry-After and the RateLimit fields. */
function expectLimited(seen: { status: number; headers: Record<string, string> }[]): void {
  expect(seen.map((r) => r.status)).toEqual([200, 200, 429]);
  for (const response of seen) {
    expect(response.headers["ratelimit-policy"], JSON.stringify(response.headers)).toMatch(/q=2/);
    expect(response.headers["ratelimit"]).toMatch(/r=\d/);
  }
  expect(seen[0]!.headers["ratelimit"]).toMatch(/r=1/);
  expect(Number(seen[2]!.headers["retry-after"])).toBeGreaterThan(0);
}

beforeAll(async () => {
  work = mkdtempSync(path.join(os.tmpdir(), "floodgate-packaging-"));
  app = path.join(work, "app");
  mkdirSync(app);

  await Promise.all(
    stalePackages().map((pkg) =>
      mustRun("npm", ["run", "build", "--silent"], { cwd: path.join(ROOT, "packages", pkg), timeoutMs: 150_000 })
    ),
  );
  const report = JSON.parse(
    await mustRun("npm", ["pack", "--json", "--pack-destination", work, ...PACKAGES.flatMap((pkg) => ["-w", `packages/${pkg}`])], {
      cwd: ROOT,
    }),
  ) as { name: string; filename: string; files: { path: string }[] }[];
  const tarballs: Tarball[] = report.map((entry) => {
    const manifest = JSON.parse(readFileSync(path.join(ROOT, "packages", entry.name.replace("@floodgate/", ""), "package.json"), "utf8"));
    packed.set(entry.name, { files: entry.files.map((f) => f.path), manifest });
    return { name: entry.name, file: path.join(work, entry.filename.replace(/^@floodgate\//, "floodgate-").replace("/", "-")), manifest };
  });
  for (const tarball of tarballs) if (!existsSync(tarball.file)) throw new Error(`npm pack wrote no ${tarball.file}`);

  const { packageJson, lock } = scratchLock({
    repoLockFile: path.join(ROOT, "package-lock.json"),
    appDir: app,
    registryDependencies: REGISTRY_DEPENDENCIES,
    tarballs,
  });
  writeFileSync(path.join(app, "package.json"), JSON.stringify({ ...packageJson, type: "module" }, null, 2));
  writeFileSync(path.join(app, "package-lock.json"), JSON.stringify(lock, null, 2));
  for (const [name, text] of Object.entries(scratchFiles({ coreHttpEntry: CORE_HTTP_ENTRY }))) writeFileSync(path.join(app, name), text);
  await mustRun("npm", ["ci", "--offline", "--no-audit", "--no-fund", "--ignore-scripts"], { cwd: app, timeoutMs: 120_000 });
  typecheck = run(process.execPath, [path.join(app, "node_modules", "typescript", "bin", "tsc"), "-p", "tsconfig.json"], {
    cwd: app,
    timeoutMs: 90_000,
  });
}, 240_000);

afterAll(async () => {
  await typecheck?.catch(() => undefined);
  if (work !== undefined) rmSync(work, { recursive: true, force: true });
});

describe("the packed packages, installed outside the repository", () => {
  it("each tarball holds its README, LICENSE, package.json and every file its package.json points at", () => {
    expect([...packed.keys()].sort()).toEqual(PACKAGES.map((p) => `@floodgate/${p}`).sort());
    for (const [name, { files, manifest }] of packed) {
      const pointedAt = new Set<string>();
      const walk = (value: unknown): void => {
        if (typeof value === "string") pointedAt.add(value.replace(/^\.\//, ""));
        else if (value !== null && typeof value === "object") Object.values(value).forEach(walk);
      };
      walk([manifest.main, manifest.module, manifest.types, manifest.exports, manifest.bin]);
      for (const file of ["package.json", "README.md", "LICENSE", ...pointedAt]) expect(files, `${name} lacks ${file}`).toContain(file);
      // Only what a user needs: no sources, tests or configs.
      expect(files.filter((f) => !/^(dist\/|package\.json$|README\.md$|LICENSE$)/.test(f)), name).toEqual([]);
    }
  });

  it("the installed packages are the tarballs' copies, not links into the repository", () => {
    for (const pkg of PACKAGES) {
      const installed = path.join(app, "node_modules", "@floodgate", pkg);
      expect(readFileSync(path.join(installed, "LICENSE"), "utf8")).toContain("The Floodgate authors");
      expect(path.relative(ROOT, realpathSync(installed)).startsWith(".."), installed).toBe(true);
      expect(existsSync(path.join(installed, "src"))).toBe(false);
    }
  });

  it("Express (ESM): 200, 200, then 429 with the headers", async () => {
    const seen = await node("express.mjs");
    expectLimited(seen);
    expect(JSON.parse(seen[0].body)).toEqual({ remaining: 1 });
  });

  it("Hono on @hono/node-server (ESM): 200, 200, then 429 with the headers", async () => {
    const seen = await node("hono.mjs");
    expectLimited(seen);
    expect(JSON.parse(seen[1].body)).toEqual({ remaining: 0 });
  });

  it("Koa (ESM): 200, 200, then 429 with the headers", async () => {
    const seen = await node("koa.mjs");
    expectLimited(seen);
    expect(JSON.parse(seen[0].body)).toEqual({ remaining: 1 });
  });

  it("a fetch handler wrapped by withRateLimit (ESM): 200, 200, then 429 with the headers", async () => {
    const seen = await node("fetch.mjs");
    expectLimited(seen);
    expect(JSON.parse(seen[0].body)).toEqual({ path: "/hello" });
  });

  it("core from CommonJS (require): the limiter, its errors and withRateLimit over HTTP", async () => {
    const out = await node("core.cjs");
    expect(out.decisions).toEqual([true, false]);
    expect(out.invalid).toEqual({ isFloodgateError: true, code: "INVALID_OPTION" });
    expectLimited(out.http);
  });

  it.runIf(CORE_HTTP_ENTRY)("core's second entry, @floodgate/core/http, from ESM and from CommonJS", async () => {
    const esm = await node("core-http.mjs");
    const cjs = await node("core-http.cjs");
    expect(Object.values(esm)).toContain("function");
    expect(cjs).toEqual(esm);
  });

  it("a TypeScript consumer (module node16, ESM and CJS files) typechecks against the declarations", async () => {
    const result = await typecheck;
    expect(result.stdout + result.stderr).toBe("");
    expect(result.code).toBe(0);
  });

  it("upstash-local: its bin serves @upstash/redis for core's upstashStore, and the API loads from CommonJS", async () => {
    expect(await node("upstash-local.cjs")).toEqual({ startUpstashBridge: "function", endpoint: { host: "127.0.0.1", port: 6380, db: 1 } });

    const redis = await startRedis();
    const bin = spawn(path.join(app, "node_modules", ".bin", "upstash-local"), ["--redis", redis.url], {
      cwd: app,
      stdio: ["ignore", "pipe", "pipe"],
    });
    try {
      const printed = await new Promise<Record<string, string>>((resolve, reject) => {
        let stdout = "";
        let stderr = "";
        bin.stderr!.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
        bin.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
          stdout += chunk;
          const env = Object.fromEntries(
            stdout.split("\n").filter((l) => l.includes("=")).map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]),
          );
          if (env["UPSTASH_REDIS_REST_TOKEN"] !== undefined) resolve(env);
        });
        bin.once("exit", (code) => reject(new Error(`upstash-local exited ${code}: ${stderr}`)));
      });
      expect(await node("upstash.mjs", printed)).toEqual({ decisions: [true, true, false], ping: "PONG" });
      const exited = new Promise<number | null>((resolve) => bin.once("exit", resolve));
      bin.kill("SIGTERM");
      expect(await exited).toBe(0);
    } finally {
      if (bin.exitCode === null && bin.pid !== undefined) process.kill(bin.pid, "SIGKILL");
      await redis.stop();
    }
  });
});
