#!/usr/bin/env node
// `npm run version-packages`: turns the pending notes in .changeset/ into a release, so that every
// place holding a version moves together:
//   1. `changeset version` bumps each packages/*/package.json (the four @floodgate/* packages form
//      one `fixed` group: they always share a version), the internal dependency ranges, and writes
//      packages/*/CHANGELOG.md;
//   2. this script copies each package.json version into the package's deno.json (what JSR
//      publishes), moves any `jsr:@floodgate/*` import range in a deno.json, updates the workspace
//      entries of package-lock.json (else `npm ci` refuses a lock out of step with the manifests),
//      and adds the release to the root CHANGELOG.md.
//
//   node scripts/version-packages.mjs              both steps
//   node scripts/version-packages.mjs --sync-only  step 2 only (after a plain `npx changeset version`)
//
// No network and no git command that a copy without history would fail: .changeset/config.json has
// `commit: false`, and changesets reads git only for the commit ids it puts in changelog lines.
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";

const root = resolve(import.meta.dirname, "..");
const PACKAGES = ["core", "hono", "express", "koa"];
const SCOPE = "@floodgate/";
const CHANGELOG_MARKER = "<!-- npm run version-packages adds each release below this line -->";

const readJson = (path) => JSON.parse(readFileSync(path, "utf8"));
/** Writes JSON as the repository does: two-space indent, final newline. */
const writeJson = (path, value) => writeFileSync(path, `${JSON.stringify(value, null, 2)}\n`);
/**
 * JSON as the packages' package.json files are written: two-space indent, but an array of plain
 * values on one line (`"files": ["dist", "README.md"]`), so a release changes only version lines
 * (changesets itself writes every array one item a line).
 */
function stringifyManifest(value, indent = "") {
  const inner = `${indent}  `;
  if (Array.isArray(value)) {
    if (value.every((v) => v === null || typeof v !== "object")) return JSON.stringify(value).replaceAll('","', '", "');
    return `[\n${value.map((v) => inner + stringifyManifest(v, inner)).join(",\n")}\n${indent}]`;
  }
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value);
    if (entries.length === 0) return "{}";
    return `{\n${entries.map(([k, v]) => `${inner}${JSON.stringify(k)}: ${stringifyManifest(v, inner)}`).join(",\n")}\n${indent}}`;
  }
  return JSON.stringify(value);
}
/** `^0.1.0` → `^0.2.0`: keeps the range's operator (none, ^, ~, >=), changes the version. */
const moveRange = (range, version) => `${/^(\^|~|>=|<=|>|<|=)?/.exec(range)[0]}${version}`;

if (!process.argv.includes("--sync-only")) {
  // changesets rewrites each package.json whole; write them back in their own style afterwards.
  const changeset = join(root, "node_modules", ".bin", "changeset");
  const result = spawnSync(changeset, ["version"], { cwd: root, stdio: "inherit" });
  if (result.status !== 0) {
    console.error(`changeset version failed (${result.error?.message ?? `exit ${result.status}`})`);
    process.exit(1);
  }
}

for (const p of PACKAGES) {
  const path = join(root, "packages", p, "package.json");
  writeFileSync(path, `${stringifyManifest(readJson(path))}\n`);
}

const versions = new Map(PACKAGES.map((p) => [`${SCOPE}${p}`, readJson(join(root, "packages", p, "package.json")).version]));
const distinct = new Set(versions.values());
if (distinct.size !== 1) {
  console.error(`The @floodgate/* packages must share one version, found: ${[...versions].map(([n, v]) => `${n}@${v}`).join(", ")}.`);
  process.exit(1);
}
const [version] = distinct;

// deno.json: each package's own version, and every jsr:@floodgate/* import range (root and packages).
for (const dir of ["", ...PACKAGES.map((p) => join("packages", p))]) {
  const path = join(root, dir, "deno.json");
  if (!existsSync(path)) continue;
  const deno = readJson(path);
  if (dir !== "") deno.version = versions.get(deno.name) ?? version;
  for (const [key, target] of Object.entries(deno.imports ?? {})) {
    const m = /^jsr:(@floodgate\/[^@/]+)@([^/]+)(\/.*)?$/.exec(target);
    if (m && versions.has(m[1])) deno.imports[key] = `jsr:${m[1]}@${moveRange(m[2], versions.get(m[1]))}${m[3] ?? ""}`;
  }
  writeJson(path, deno);
}

// package-lock.json: the workspace entries mirror their package.json (version, @floodgate/* ranges).
const lockPath = join(root, "package-lock.json");
if (existsSync(lockPath)) {
  const lock = readJson(lockPath);
  for (const p of PACKAGES) {
    const entry = lock.packages?.[`packages/${p}`];
    if (!entry) continue;
    const manifest = readJson(join(root, "packages", p, "package.json"));
    entry.version = manifest.version;
    for (const field of ["dependencies", "devDependencies", "peerDependencies", "optionalDependencies"]) {
      for (const name of Object.keys(entry[field] ?? {})) {
        if (name.startsWith(SCOPE) && manifest[field]?.[name]) entry[field][name] = manifest[field][name];
      }
    }
  }
  writeJson(lockPath, lock);
}

// CHANGELOG.md: the release's entries, each once (a note naming several packages appears in each
// of their changelogs), without the "Updated dependencies" lines the fixed group implies.
const sections = new Map(); // "### Minor Changes" → Map(entry → package names)
for (const p of PACKAGES) {
  const path = join(root, "packages", p, "CHANGELOG.md");
  if (!existsSync(path)) continue;
  const lines = readFileSync(path, "utf8").split("\n");
  const start = lines.findIndex((l) => l.trim() === `## ${version}`);
  if (start === -1) continue;
  let heading = "### Changes";
  let entry;
  const flush = () => {
    if (entry === undefined) return;
    const text = entry.trimEnd();
    if (!/^- (\S+: )?Updated dependencies\b/.test(text)) {
      if (!sections.has(heading)) sections.set(heading, new Map());
      const entries = sections.get(heading);
      entries.set(text, [...(entries.get(text) ?? []), `${SCOPE}${p}`]);
    }
    entry = undefined;
  };
  for (const line of lines.slice(start + 1)) {
    if (line.startsWith("## ")) break;
    if (line.startsWith("### ")) {
      flush();
      heading = line.trim();
    } else if (line.startsWith("- ")) {
      flush();
      entry = `${line}\n`;
    } else if (entry !== undefined) entry += `${line}\n`;
  }
  flush();
}
const changelogPath = join(root, "CHANGELOG.md");
const changelog = readFileSync(changelogPath, "utf8");
if (sections.size > 0 && !changelog.includes(`\n## ${version}\n`)) {
  const all = PACKAGES.length;
  let release = `## ${version}\n`;
  for (const [heading, entries] of sections) {
    release += `\n${heading}\n\n`;
    for (const [text, names] of entries) {
      const which = names.length === all ? "" : ` (${names.map((n) => `\`${n}\``).join(", ")})`;
      const [first, ...rest] = text.split("\n");
      release += `${[first + which, ...rest].join("\n")}\n`;
    }
  }
  const at = changelog.indexOf(CHANGELOG_MARKER);
  if (at === -1) {
    console.error(`CHANGELOG.md lacks the line ${CHANGELOG_MARKER}: the release was not added to it.`);
    process.exit(1);
  }
  const head = changelog.slice(0, at + CHANGELOG_MARKER.length);
  const tail = changelog.slice(at + CHANGELOG_MARKER.length).replace(/^\n+/, "");
  writeFileSync(changelogPath, `${head}\n\n${release}${tail ? `\n${tail}` : ""}`);
}

console.log(`All @floodgate/* packages at ${version}: package.json, deno.json, internal ranges, package-lock.json and CHANGELOG.md.`);
