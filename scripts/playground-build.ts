/**
 * The playground's bundle and its static server, shared by `npm run playground` and the browser
 * test. The page's script bundles `@floodgate/core` from its build (dist), as a user's bundler
 * would with the "browser" condition; the page needs nothing but static files.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { build, type Metafile } from "esbuild";

export const ROOT = fileURLToPath(new URL("..", import.meta.url));
/** The folder served: docs/, so the page can link the guide and its figures. */
export const DOCS_DIR = path.join(ROOT, "docs");
export const PLAYGROUND_ENTRY = path.join(DOCS_DIR, "playground", "main.ts");
/** Where the bundle goes (git-ignored, as every dist/ is); index.html loads it from there. */
export const BUNDLE_FILE = path.join(DOCS_DIR, "playground", "dist", "playground.js");
export const PLAYGROUND_PATH = "/playground/";

function newestMtimeMs(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtimeMs(full) : statSync(full).mtimeMs);
  }
  return newest;
}

/** True when packages/core/dist exists and is newer than its source. */
export function coreBuildIsFresh(): boolean {
  const dist = path.join(ROOT, "packages", "core", "dist", "index.js");
  return existsSync(dist) && statSync(dist).mtimeMs >= newestMtimeMs(path.join(ROOT, "packages", "core", "src"));
}

/** Builds @floodgate/core (tsup) when its dist is missing or older than its source. */
export function ensureCoreBuilt(): void {
  if (coreBuildIsFresh()) return;
  console.log("building @floodgate/core (its dist is missing or older than its source)");
  const result = spawnSync("npm", ["run", "build", "--silent", "--workspace", "@floodgate/core"], { cwd: ROOT, stdio: "inherit" });
  if (result.status !== 0) throw new Error("`npm run build --workspace @floodgate/core` failed; the playground bundles core's build");
}

export interface PlaygroundBundle {
  code: string;
  /** Every input file, relative to the repository root. */
  inputs: string[];
}

/** Bundles the page's script into one classic script; `write` also saves it to BUNDLE_FILE. */
export async function bundlePlayground(options: { write?: boolean } = {}): Promise<PlaygroundBundle> {
  const result = await build({
    entryPoints: [PLAYGROUND_ENTRY],
    absWorkingDir: ROOT,
    bundle: true,
    write: false,
    metafile: true,
    format: "iife",
    platform: "browser",
    target: "es2022",
    mainFields: ["module", "main"],
    conditions: ["browser", "import", "default"],
    // No tsconfig paths: `@floodgate/core` resolves through node_modules to the package's dist.
    tsconfigRaw: "{}",
    logLevel: "silent",
  });
  const code = result.outputFiles[0]!.text;
  if (options.write === true) {
    mkdirSync(path.dirname(BUNDLE_FILE), { recursive: true });
    writeFileSync(BUNDLE_FILE, code);
  }
  return { code, inputs: Object.keys((result.metafile as Metafile).inputs) };
}

const CONTENT_TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".md": "text/markdown; charset=utf-8",
  ".png": "image/png",
  ".json": "application/json",
};

export interface StaticServer {
  url: string;
  close(): Promise<void>;
}

/**
 * Serves `root`'s files on 127.0.0.1 (`port` 0: a free one). `overrides` maps URL paths to
 * contents served instead of files (the test serves an in-memory bundle that way).
 */
export async function serveStatic(root: string, port: number, overrides: Record<string, string> = {}): Promise<StaticServer> {
  const server = http.createServer((req, res) => {
    let pathname: string;
    try {
      pathname = decodeURIComponent(new URL(req.url ?? "/", "http://127.0.0.1").pathname);
    } catch {
      res.writeHead(400, { "content-type": "text/plain" }).end("bad request");
      return;
    }
    if (req.method !== "GET" && req.method !== "HEAD") {
      res.writeHead(405, { allow: "GET, HEAD", "content-type": "text/plain" }).end("method not allowed");
      return;
    }
    const override = overrides[pathname];
    if (override !== undefined) {
      res.writeHead(200, {
        "content-type": CONTENT_TYPES[path.extname(pathname)] ?? "application/octet-stream",
        "cache-control": "no-store",
      }).end(override);
      return;
    }
    let file = path.join(root, pathname);
    if (file !== root && !file.startsWith(root + path.sep)) {
      res.writeHead(403, { "content-type": "text/plain" }).end("forbidden");
      return;
    }
    if (existsSync(file) && statSync(file).isDirectory()) {
      if (!pathname.endsWith("/")) {
        res.writeHead(301, { location: `${pathname}/` }).end();
        return;
      }
      file = path.join(file, "index.html");
    }
    if (!existsSync(file) || !statSync(file).isFile()) {
      res.writeHead(404, { "content-type": "text/plain" }).end("not found");
      return;
    }
    res.writeHead(200, { "content-type": CONTENT_TYPES[path.extname(file)] ?? "application/octet-stream", "cache-control": "no-store" });
    res.end(req.method === "HEAD" ? undefined : readFileSync(file));
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen({ host: "127.0.0.1", port }, resolve);
  });
  const address = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${address.port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
