/**
 * What npm shows about every published package: where its source lives, where to report a bug,
 * its license (and the LICENSE file that ships with it). The repository URL is written once, in
 * the root package.json; every package must agree with it.
 */
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const json = (file: string): any => JSON.parse(readFileSync(path.join(ROOT, file), "utf8"));

const root = json("package.json");
/** "git+https://github.com/owner/name.git" → "https://github.com/owner/name". */
const REPOSITORY_URL: string = root.repository.url;
const WEB_URL = REPOSITORY_URL.replace(/^git\+/, "").replace(/\.git$/, "");
const workspaces: string[] = root.workspaces;

describe("package metadata", () => {
  it("the root package.json names the repository once, as a git+https URL", () => {
    expect(root.repository).toEqual({ type: "git", url: expect.stringMatching(/^git\+https:\/\/github\.com\/[\w.-]+\/[\w.-]+\.git$/) });
    expect(root.bugs).toBe(`${WEB_URL}/issues`);
    expect(workspaces.length).toBeGreaterThanOrEqual(5);
  });

  it.each(workspaces)("%s: repository, homepage, bugs, keywords, MIT license, LICENSE shipped", (workspace) => {
    const manifest = json(path.join(workspace, "package.json"));
    const dir = path.basename(workspace);
    expect(manifest.name).toBe(`@floodgate/${dir}`);
    expect(manifest.repository).toEqual({ type: "git", url: REPOSITORY_URL, directory: workspace });
    expect(manifest.homepage).toBe(`${WEB_URL}/tree/main/${workspace}#readme`);
    expect(manifest.bugs).toBe(`${WEB_URL}/issues`);
    expect(manifest.funding).toBeUndefined();
    expect(manifest.license).toBe("MIT");
    expect(manifest.keywords).toEqual(expect.arrayContaining([expect.any(String)]));
    expect(manifest.description).toMatch(/\w.{20,}/);
    expect(manifest.files).toEqual(expect.arrayContaining(["dist", "README.md", "LICENSE"]));
    expect(existsSync(path.join(ROOT, workspace, "README.md"))).toBe(true);
    const license = readFileSync(path.join(ROOT, workspace, "LICENSE"), "utf8");
    expect(license).toMatch(/^MIT License\n\nCopyright \(c\) \d{4} The Floodgate authors\n/);
    expect(license).toBe(readFileSync(path.join(ROOT, "LICENSE"), "utf8"));
  });

  it("every JSR package publishes its LICENSE and agrees with npm on name, version and license", () => {
    const deno = json("deno.json");
    for (const member of deno.workspace as string[]) {
      const workspace = member.replace(/^\.\//, "");
      expect(workspaces).toContain(workspace);
      const jsr = json(path.join(workspace, "deno.json"));
      const npm = json(path.join(workspace, "package.json"));
      expect({ name: jsr.name, version: jsr.version, license: jsr.license }).toEqual({
        name: npm.name,
        version: npm.version,
        license: npm.license,
      });
      expect(jsr.publish.include).toContain("LICENSE");
    }
  });
});
