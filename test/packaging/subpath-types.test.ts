/**
 * Every subpath a package exports (`@floodgate/core/http`, `@floodgate/core/store`,
 * `@floodgate/express/augment`) has its types found under TypeScript's `node10` resolution too,
 * which reads no `exports`: a `typesVersions` entry pointing at the same declarations as the
 * `require` condition. Without it the import does not resolve there, and a side-effect import
 * (`import "@floodgate/express/augment"`) silently does nothing. `npm test` also runs
 * `attw --pack` with every profile on the packed packages.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const root = join(import.meta.dirname, "../..");
const packages = readdirSync(join(root, "packages")).filter((p) => !p.startsWith("."));

interface Manifest {
  exports?: Record<string, string | { require?: { types?: string }; import?: { types?: string } }>;
  typesVersions?: Record<string, Record<string, string[]>>;
}

describe.each(packages)("@floodgate/%s", (pkg) => {
  const manifest = JSON.parse(readFileSync(join(root, "packages", pkg, "package.json"), "utf8")) as Manifest;
  const subpaths = Object.entries(manifest.exports ?? {}).filter(([path, target]) =>
    path !== "." && typeof target === "object" && target.require?.types !== undefined
  );

  it("maps each typed subpath export for node10 (typesVersions), to its require types", () => {
    for (const [path, target] of subpaths) {
      const name = path.slice(2);
      const mapped = manifest.typesVersions?.["*"]?.[name];
      expect(mapped, `typesVersions["*"]["${name}"]`).toEqual([(target as { require: { types: string } }).require.types]);
    }
  });
});

it("the subpaths checked include core's http and store and express' augment", () => {
  const core = JSON.parse(readFileSync(join(root, "packages/core/package.json"), "utf8")) as Manifest;
  const express = JSON.parse(readFileSync(join(root, "packages/express/package.json"), "utf8")) as Manifest;
  expect(Object.keys(core.typesVersions?.["*"] ?? {}).sort()).toEqual(["http", "store"]);
  expect(Object.keys(express.typesVersions?.["*"] ?? {})).toEqual(["augment"]);
});
