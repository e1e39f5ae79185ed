#!/usr/bin/env node
// Fails when the architecture's direction is broken:
// - packages/core imports no `node:*` module, no Node built-in and no framework (it must run on
//   Node, Deno, Bun, workerd and in a browser);
// - an adapter or a store package imports nothing of core but its entries for their authors,
//   `@floodgate/core/http` and `@floodgate/core/store` (not the application entry
//   `@floodgate/core`, no deep imports, no relative paths out of its own package), and core never
//   imports another Floodgate package;
// - a standalone tool (upstash-local) imports no Floodgate package at all;
// - every package imports only Node built-ins, its own files and what its package.json declares
//   in `dependencies` or `peerDependencies` (so its tarball works once installed), and a runtime's
//   own modules (`cloudflare:workers`) only in the package made for that runtime.
import { readdirSync, readFileSync, statSync } from "node:fs";
import { builtinModules } from "node:module";
import { join, relative, resolve } from "node:path";

const root = resolve(import.meta.dirname, "..");
const AUTHOR_ENTRIES = ["@floodgate/core/http", "@floodgate/core/store"];
const FRAMEWORKS = ["hono", "express", "koa", "@koa/router", "@hono/node-server"];
const NODE_BUILTINS = new Set(builtinModules.flatMap((m) => [m, `node:${m}`]));
/** Modules a runtime provides itself, each allowed only in the package made for that runtime. */
const RUNTIME_MODULES = new Map([["cloudflare:workers", "cloudflare"]]);
/** Packages that use core as an application does (the contract suite builds limiters over the store it tests). */
const APPLICATIONS = new Set(["testing"]);
/** Packages that stand alone: they speak to users' apps, not through core. */
const STANDALONE = new Set(["upstash-local"]);
const IMPORT =
  /(?:^|[\s;])(?:import|export)\s[^"'`]*?from\s*["']([^"']+)["']|import\(\s*["']([^"']+)["']\s*\)|require\(\s*["']([^"']+)["']\s*\)/g;

function* sources(dir) {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) yield* sources(path);
    else if (/\.(ts|mts|js|mjs)$/.test(name)) yield path;
  }
}

function imports(file, { code = false } = {}) {
  let text = readFileSync(file, "utf8");
  // Doc comments hold usage examples (`import { Redis } from "ioredis"`): real imports only.
  if (code) text = text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "");
  const found = [];
  for (const m of text.matchAll(IMPORT)) found.push(m[1] ?? m[2] ?? m[3]);
  return found;
}

/** "hono/jsx" → "hono", "@koa/router/x" → "@koa/router". */
const packageName = (spec) => spec.split("/").slice(0, spec.startsWith("@") ? 2 : 1).join("/");

const problems = [];
const packages = readdirSync(join(root, "packages"));
for (const pkg of packages) {
  const src = join(root, "packages", pkg, "src");
  let manifest;
  try {
    manifest = JSON.parse(readFileSync(join(root, "packages", pkg, "package.json"), "utf8"));
  } catch {
    continue;
  }
  const declared = new Set([...Object.keys(manifest.dependencies ?? {}), ...Object.keys(manifest.peerDependencies ?? {})]);
  let files;
  try {
    files = [...sources(src)];
  } catch {
    continue;
  }
  for (const file of files) {
    for (const spec of imports(file, { code: true })) {
      if (
        !spec.startsWith(".") && !NODE_BUILTINS.has(spec) && !spec.startsWith("node:") && !RUNTIME_MODULES.has(spec) &&
        !declared.has(packageName(spec))
      ) {
        problems.push(
          `${relative(root, file)} imports "${spec}": "${
            packageName(spec)
          }" is not in packages/${pkg}/package.json dependencies or peerDependencies`,
        );
      }
    }
    for (const spec of imports(file)) {
      const where = `${relative(root, file)} imports "${spec}"`;
      if (RUNTIME_MODULES.has(spec) && RUNTIME_MODULES.get(spec) !== pkg) {
        problems.push(`${where}: only packages/${RUNTIME_MODULES.get(spec)} may import the runtime's own "${spec}"`);
      }
      if (pkg === "core") {
        if (NODE_BUILTINS.has(spec) || spec.startsWith("node:")) problems.push(`${where}: core must not import Node built-ins`);
        if (FRAMEWORKS.some((f) => spec === f || spec.startsWith(`${f}/`))) problems.push(`${where}: core must not import a framework`);
        if (spec.startsWith("@floodgate/")) problems.push(`${where}: core must not import an adapter`);
      } else if (STANDALONE.has(pkg)) {
        if (spec.startsWith("@floodgate/")) problems.push(`${where}: ${pkg} stands alone and imports no Floodgate package`);
      } else {
        const entry = APPLICATIONS.has(pkg) ? [...AUTHOR_ENTRIES, "@floodgate/core"] : AUTHOR_ENTRIES;
        if ((spec === "@floodgate/core" || spec.startsWith("@floodgate/core/")) && !entry.includes(spec)) {
          problems.push(`${where}: a package imports core only through ${AUTHOR_ENTRIES.join(" or ")}, the entries for its authors`);
        }
        if (spec.startsWith(".") && !resolve(file, "..", spec).startsWith(join(root, "packages", pkg))) {
          problems.push(`${where}: adapters may not reach outside their package`);
        }
      }
      if (STANDALONE.has(pkg) && spec.startsWith(".") && !resolve(file, "..", spec).startsWith(join(root, "packages", pkg))) {
        problems.push(`${where}: ${pkg} may not reach outside its package`);
      }
    }
  }
}

if (problems.length > 0) {
  console.error(`Architecture check failed:\n- ${problems.join("\n- ")}`);
  process.exit(1);
}
console.log(`Architecture check passed (${packages.length} packages).`);
