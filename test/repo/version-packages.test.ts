// `npm run version-packages` on a copy of the repository's manifests (no git history, no network):
// one patch note for one package moves every version place of all four packages together.
import { execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const ROOT = resolve(import.meta.dirname, "../..");
const PACKAGES = ["core", "hono", "express", "koa"];
const ADAPTERS = ["hono", "express", "koa"];
const SUMMARY = "The Hono middleware answers HEAD requests like GET ones.";

/** Everything the command reads or writes, and nothing else (in particular no .git). */
const FILES = [
  "package.json",
  "package-lock.json",
  "deno.json",
  "CHANGELOG.md",
  ".changeset/config.json",
  "scripts/version-packages.mjs",
  ...PACKAGES.flatMap((p) => [`packages/${p}/package.json`, `packages/${p}/deno.json`]),
];

type Json = Record<string, any>;
const readJson = (dir: string, file: string): Json => JSON.parse(readFileSync(join(dir, file), "utf8"));
const patchOf = (version: string): string => version.replace(/(\d+)$/, (n) => String(Number(n) + 1));

let copy: string;
let before: string;
let after: string;
let output: string;

beforeAll(() => {
  copy = mkdtempSync(join(tmpdir(), "floodgate-version-"));
  for (const file of FILES) {
    mkdirSync(dirname(join(copy, file)), { recursive: true });
    cpSync(join(ROOT, file), join(copy, file));
  }
  symlinkSync(join(ROOT, "node_modules"), join(copy, "node_modules"), "dir");
  writeFileSync(join(copy, ".changeset", "head-requests.md"), `---\n"@floodgate/hono": patch\n---\n\n${SUMMARY}\n`);
  before = readJson(copy, "packages/core/package.json")["version"];
  after = patchOf(before);
  output = execFileSync(process.execPath, ["scripts/version-packages.mjs"], {
    cwd: copy,
    encoding: "utf8",
    // Git must find no repository around the copy: the command has to work without one.
    env: { ...process.env, GIT_CEILING_DIRECTORIES: dirname(copy) },
    timeout: 60_000,
  });
}, 90_000);

afterAll(() => {
  if (copy) rmSync(copy, { recursive: true, force: true });
});

describe("npm run version-packages", () => {
  it("bumps all four packages together, though the note names only one (one fixed group)", () => {
    expect(before).toMatch(/^\d+\.\d+\.\d+$/);
    for (const p of PACKAGES) expect(readJson(copy, `packages/${p}/package.json`)["version"], p).toBe(after);
    expect(output).toContain(`All @floodgate/* packages at ${after}`);
  });

  it("copies the version into every deno.json (what JSR publishes)", () => {
    for (const p of PACKAGES) {
      const deno = readJson(copy, `packages/${p}/deno.json`);
      expect(deno["name"]).toBe(`@floodgate/${p}`);
      expect(deno["version"], p).toBe(after);
    }
  });

  it("moves each adapter's range on @floodgate/core, keeping its operator", () => {
    for (const p of ADAPTERS) {
      const original = readJson(ROOT, `packages/${p}/package.json`)["dependencies"]["@floodgate/core"] as string;
      const operator = original.slice(0, original.length - before.length);
      expect(original.endsWith(before), `${p} depends on the current core`).toBe(true);
      expect(readJson(copy, `packages/${p}/package.json`)["dependencies"]["@floodgate/core"]).toBe(`${operator}${after}`);
    }
  });

  it("keeps package-lock.json's workspace entries in step with the manifests (else `npm ci` refuses it)", () => {
    const lock = readJson(copy, "package-lock.json");
    for (const p of PACKAGES) {
      const entry = lock["packages"][`packages/${p}`];
      const manifest = readJson(copy, `packages/${p}/package.json`);
      expect(entry["version"], p).toBe(after);
      expect(entry["dependencies"] ?? {}, p).toEqual(manifest["dependencies"] ?? {});
    }
  });

  it("changes nothing in a manifest but its version lines, in the manifest's own style", () => {
    for (const file of PACKAGES.flatMap((p) => [`packages/${p}/package.json`, `packages/${p}/deno.json`])) {
      const was = readFileSync(join(ROOT, file), "utf8").split("\n");
      const is = readFileSync(join(copy, file), "utf8").split("\n");
      expect(is.length, file).toBe(was.length);
      const changed = is.filter((line, i) => line !== was[i]);
      expect(changed.length, file).toBeGreaterThan(0);
      for (const line of changed) {
        expect(line, file).toMatch(new RegExp(`^\\s+"(version|@floodgate/core)": "[^"]*${after.replaceAll(".", "\\.")}",?$`));
      }
    }
  });

  it("leaves no version behind: the old one appears in no manifest", () => {
    for (const file of PACKAGES.flatMap((p) => [`packages/${p}/package.json`, `packages/${p}/deno.json`])) {
      expect(readFileSync(join(copy, file), "utf8"), file).not.toContain(`"${before}"`);
    }
  });

  it("adds the release to the root CHANGELOG.md once, naming the one package the note is about", () => {
    const changelog = readFileSync(join(copy, "CHANGELOG.md"), "utf8");
    const release = changelog.slice(changelog.indexOf(`## ${after}\n`));
    expect(changelog).toContain(`\n## ${after}\n\n### Patch Changes\n\n- ${SUMMARY} (\`@floodgate/hono\`)\n`);
    expect(changelog.split(SUMMARY)).toHaveLength(2);
    expect(release).not.toMatch(/Updated dependencies/);
  });

  it("writes each package's CHANGELOG.md and consumes the note", () => {
    expect(readFileSync(join(copy, "packages/hono/CHANGELOG.md"), "utf8")).toContain(SUMMARY);
    for (const p of PACKAGES) expect(readFileSync(join(copy, `packages/${p}/CHANGELOG.md`), "utf8")).toContain(`## ${after}`);
    expect(readdirSync(join(copy, ".changeset")).sort()).toEqual(["config.json"]);
    expect(existsSync(join(copy, ".git"))).toBe(false);
  });
});
