// The MIT licence ships with every package, on npm (the `files` of package.json: npm packs only the
// package's own directory) and on JSR (deno.json `publish.include`), and says the same everywhere.
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = resolve(import.meta.dirname, "../..");
const PACKAGES = ["core", "hono", "express", "koa"];
const read = (...parts: string[]): string => readFileSync(join(ROOT, ...parts), "utf8");

describe("LICENSE", () => {
  it("is the MIT licence of the Floodgate authors", () => {
    expect(read("LICENSE")).toMatch(/^MIT License\n\nCopyright \(c\) 2026 The Floodgate authors\n/);
  });

  it.each(PACKAGES)("@floodgate/%s ships the same LICENSE on npm and JSR", (p) => {
    expect(read("packages", p, "LICENSE")).toBe(read("LICENSE"));
    const manifest = JSON.parse(read("packages", p, "package.json"));
    expect(manifest.license).toBe("MIT");
    expect(manifest.files).toContain("LICENSE");
    const deno = JSON.parse(read("packages", p, "deno.json"));
    expect(deno.license).toBe("MIT");
    expect(deno.publish.include).toContain("LICENSE");
  });
});
