/**
 * The shape of the source, checked: every file of the packages holds one concern and stays under
 * 400 lines, and the import graph of each package has no cycle, type imports included (a shared
 * type lives in a module that imports nothing that imports it back).
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const MAX_LINES = 400;

function* sources(dir: string): Generator<string> {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) yield* sources(path);
    else if (/\.(ts|mts)$/.test(name) && !name.endsWith(".d.ts")) yield path;
  }
}

const packageSources = readdirSync(join(ROOT, "packages")).flatMap((pkg) => {
  try {
    return [...sources(join(ROOT, "packages", pkg, "src"))];
  } catch {
    return [];
  }
});

/** Relative imports and re-exports of a file, `import type` and `export type` included. */
function importsOf(file: string): string[] {
  const text = readFileSync(file, "utf8").replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "");
  const found: string[] = [];
  for (const m of text.matchAll(/(?:^|[\s;])(?:import|export)\s[^"'`;]*?from\s*["'](\.[^"']+)["']|import\(\s*["'](\.[^"']+)["']\s*\)/g)) {
    found.push(resolve(dirname(file), m[1] ?? m[2]!));
  }
  return found;
}

/** Every cycle's files, as found by a depth-first search (each reported once, from its first file). */
function cycles(files: readonly string[]): string[][] {
  const graph = new Map(files.map((f) => [f, importsOf(f).filter((t) => files.includes(t))]));
  const found: string[][] = [];
  const state = new Map<string, "open" | "done">();
  const stack: string[] = [];
  const visit = (file: string): void => {
    state.set(file, "open");
    stack.push(file);
    for (const next of graph.get(file) ?? []) {
      if (state.get(next) === "open") found.push(stack.slice(stack.indexOf(next)).map((f) => relative(ROOT, f)));
      else if (state.get(next) === undefined) visit(next);
    }
    stack.pop();
    state.set(file, "done");
  };
  for (const file of files) if (state.get(file) === undefined) visit(file);
  return found;
}

describe("the source's shape", () => {
  it(`no source file of a package is ${MAX_LINES} lines or more`, () => {
    expect(packageSources.length).toBeGreaterThan(50);
    const long = packageSources
      .map((f) => ({ file: relative(ROOT, f), lines: readFileSync(f, "utf8").split("\n").length - 1 }))
      .filter((f) => f.lines >= MAX_LINES)
      .map((f) => `${f.file}: ${f.lines} lines`);
    expect(long).toEqual([]);
  });

  it("the import graph has no cycle, type imports included", () => {
    expect(cycles(packageSources)).toEqual([]);
  });

  it("the check finds a cycle made only of type imports, and none in a chain", () => {
    const dir = mkdtempSync(join(tmpdir(), "fg-cycles-"));
    try {
      const write = (name: string, text: string): string => {
        writeFileSync(join(dir, name), text);
        return join(dir, name);
      };
      const a = write("a.ts", 'import type { B } from "./b.ts";\nexport interface A { b: B }\n');
      const b = write("b.ts", 'export type { A } from "./a.ts";\nexport interface B { n: number }\n');
      const c = write("c.ts", 'import { x } from "./d.ts";\nexport const y = x;\n');
      const d = write("d.ts", "export const x = 1;\n");
      expect(cycles([a, b]).map((cycle) => cycle.length)).toEqual([2]);
      expect(cycles([c, d])).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
