/**
 * Shared by the runtime suites (workerd, edge-runtime, browser, examples): bundling the packages' built ESM
 * output with esbuild, a private redis-server behind the local Upstash bridge, and loud failures
 * when a runtime is missing (these suites never skip).
 */
import { build, type Metafile } from "esbuild";
import { accessSync, constants as fsConstants, existsSync, readdirSync, statSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { type RedisInstance, startRedis } from "../support/redis-server.ts";
import { startUpstashBridge, type UpstashBridge } from "@floodgate/upstash-local";

export const ROOT = fileURLToPath(new URL("../..", import.meta.url));
export const bin = (name: string): string => path.join(ROOT, "node_modules", ".bin", name);

/** The path of a runtime binary installed from npm, or a failure saying how to install it. */
export function requireBinary(name: "deno" | "bun" | "workerd" | "edge-runtime", npmPackage: string = name): string {
  const file = bin(name);
  if (!existsSync(file)) {
    throw new Error(
      `${name} is required by this suite but ${file} is missing: install it with \`flock /tmp/floodgate-npm.lock npm i -D -E ${npmPackage}\` (or \`npm ci\`) from the repository root`,
    );
  }
  return file;
}

export const CHROMIUM_MISSING =
  "chromium is required for the browser test but was not found on PATH; install it with `apt-get install -y chromium` (`npm test` does so when it runs as root)";

/**
 * The Chromium binary the browser suite drives through playwright-core: `chromium` on PATH
 * (Debian's package), or a failure saying how to install it. Never a skip, in CI or not.
 */
export function requireChromium(): string {
  for (const dir of (process.env["PATH"] ?? "").split(path.delimiter)) {
    if (dir === "") continue;
    const candidate = path.join(dir, "chromium");
    try {
      accessSync(candidate, fsConstants.X_OK);
      return candidate;
    } catch {
      // keep looking
    }
  }
  throw new Error(CHROMIUM_MISSING);
}

/** Imports a package the suite needs, or fails saying how to install it. */
export async function requirePackage<T>(name: string, load: () => Promise<T>): Promise<T> {
  try {
    return await load();
  } catch (error) {
    throw new Error(
      `${name} is required by this suite but could not be loaded (${String(error)}): install it with \`npm ci\` from the repository root`,
    );
  }
}

function newestMtime(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtime(full) : statSync(full).mtimeMs);
  }
  return newest;
}

/**
 * The bundles are built from packages/<pkg>/dist: it must exist and be newer than the source
 * (FLOODGATE_ALLOW_STALE_DIST=1 waives the second check while sources are being edited).
 */
export function requireBuilt(packages: readonly string[] = ["core", "hono"]): void {
  for (const pkg of packages) {
    const dist = path.join(ROOT, "packages", pkg, "dist", "index.js");
    if (!existsSync(dist)) {
      throw new Error(`${dist} is missing: run \`npm run build\` first (the runtime suites bundle the built ESM output)`);
    }
    if (
      process.env["FLOODGATE_ALLOW_STALE_DIST"] !== "1" && statSync(dist).mtimeMs < newestMtime(path.join(ROOT, "packages", pkg, "src"))
    ) {
      throw new Error(
        `packages/${pkg}/dist is older than packages/${pkg}/src: run \`npm run build\` first (the runtime suites bundle the built ESM output)`,
      );
    }
  }
}

export interface BundleOptions {
  /** "esm" for Workers (module syntax), "iife" for the edge runtime (one script, no imports). */
  format: "esm" | "iife";
  /** Package export conditions of the target runtime, most specific first. */
  conditions: string[];
  define?: Record<string, string>;
  /** Modules the runtime provides itself, left as imports (e.g. `cloudflare:workers`). */
  external?: string[];
}

export interface Bundle {
  code: string;
  /** Every input file, relative to the repository root. */
  inputs: string[];
}

/**
 * Bundles an entry for a runtime. `@floodgate/*` resolve through node_modules to the packages'
 * dist (the root tsconfig's source paths are ignored on purpose: users get dist).
 */
export async function bundle(entry: string, options: BundleOptions): Promise<Bundle> {
  const result = await build({
    entryPoints: [path.resolve(ROOT, entry)],
    absWorkingDir: ROOT,
    bundle: true,
    write: false,
    metafile: true,
    format: options.format,
    platform: "neutral",
    target: "es2022",
    mainFields: ["module", "main"],
    conditions: options.conditions,
    tsconfigRaw: "{}",
    define: options.define ?? {},
    external: options.external ?? [],
    logLevel: "silent",
  });
  const inputs = Object.keys((result.metafile as Metafile).inputs);
  return { code: result.outputFiles[0]!.text, inputs };
}

/** A private redis-server and the Upstash-compatible bridge in front of it. */
export interface BridgeFixture {
  redis: RedisInstance;
  bridge: UpstashBridge;
  stop(): Promise<void>;
}

export async function startBridge(): Promise<BridgeFixture> {
  const redis = await startRedis();
  try {
    const bridge = await startUpstashBridge({ redis: { host: redis.host, port: redis.port } });
    return {
      redis,
      bridge,
      async stop() {
        await bridge.stop();
        await redis.stop();
      },
    };
  } catch (error) {
    await redis.stop();
    throw error;
  }
}
