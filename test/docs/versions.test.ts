/**
 * The docs name no version that was never released: every "since x.y.z" and every version in a
 * reference table's "since" column is at most the packages' version (they share one), and the
 * packages do share it.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const root = join(import.meta.dirname, "../..");
const packages = readdirSync(join(root, "packages")).filter((p) => !p.startsWith("."));
const versionOf = (p: string): string => JSON.parse(readFileSync(join(root, "packages", p, "package.json"), "utf8")).version;
const parts = (v: string) => v.split(".").map(Number) as [number, number, number];
const atMost = (a: string, b: string): boolean => {
  const [x, y] = [parts(a), parts(b)];
  for (let i = 0; i < 3; i++) if (x[i] !== y[i]) return x[i]! < y[i]!;
  return true;
};

function docs(): string[] {
  const md = readdirSync(join(root, "docs"), { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith(".md"))
    .map((e) => join(e.parentPath, e.name));
  return [...md, join(root, "README.md"), ...packages.map((p) => join(root, "packages", p, "README.md"))];
}

describe("versions in the docs", () => {
  it("every package has one version", () => {
    expect(new Set(packages.map(versionOf)).size).toBe(1);
  });

  it('no "since x.y.z" names a version after the packages\' own', () => {
    const current = versionOf("core");
    const late: string[] = [];
    let seen = 0;
    for (const file of docs()) {
      const text = readFileSync(file, "utf8");
      // "since 0.1.0", "(since 0.1.0)", and a table's since column: "| 0.1.0 |".
      for (const m of text.matchAll(/(?:[Ss]ince |[Bb]efore |\| )(\d+\.\d+\.\d+)\b/g)) {
        seen++;
        if (!atMost(m[1]!, current)) late.push(`${file.slice(root.length + 1)}: ${m[0]}`);
      }
    }
    expect(seen).toBeGreaterThan(20);
    expect(late).toEqual([]);
  });
});
