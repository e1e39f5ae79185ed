// The migration guides show their examples as code blocks marked with the file they come from
// (`<!-- example: test/migrating/examples/x.ts -->` just above the block). The tests import those
// files; this test holds every marked block to the file's exact text, so a guide cannot drift
// from the code that runs.
import { readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const root = fileURLToPath(new URL("../..", import.meta.url));
const GUIDES = `${root}docs/migrating/`;
const EXAMPLES = "test/migrating/examples/";
const MARKER = /<!-- example: (\S+) -->\n```ts\n([\s\S]*?)```\n/g;

const guides = readdirSync(GUIDES).filter((f) => f.endsWith(".md") && f !== "README.md").sort();
const examples = readdirSync(`${root}${EXAMPLES}`).filter((f) => f.endsWith(".ts")).sort();
const blocks = (guide: string): [string, string][] =>
  [...readFileSync(`${GUIDES}${guide}`, "utf8").matchAll(MARKER)].map((m) => [m[1]!, m[2]!]);

describe("migration guides", () => {
  it("there is one guide per peer, each with its own test", () => {
    expect(guides).toEqual([
      "express-rate-limit.md",
      "hono-rate-limiter.md",
      "koa-ratelimit.md",
      "rate-limiter-flexible.md",
      "upstash-ratelimit.md",
    ]);
    const tests = readdirSync(`${root}test/migrating`);
    for (const guide of guides) expect(tests).toContain(guide.replace(/\.md$/, ".test.ts"));
  });

  it("the index links every guide", () => {
    const index = readFileSync(`${GUIDES}README.md`, "utf8");
    for (const guide of guides) expect(index).toContain(`](${guide})`);
  });

  for (const guide of guides) {
    it(`${guide}: every example block is its file's exact text`, () => {
      const found = blocks(guide);
      expect(found.length).toBeGreaterThanOrEqual(2); // a before and an after
      for (const [file, code] of found) {
        expect(file.startsWith(EXAMPLES), file).toBe(true);
        expect(code, `${guide}: the block marked ${file}`).toBe(readFileSync(`${root}${file}`, "utf8"));
      }
    });
  }

  it("every example file is shown in exactly one guide", () => {
    const shown = guides.flatMap((g) => blocks(g).map(([file]) => file.slice(EXAMPLES.length))).sort();
    expect(shown).toEqual(examples);
  });
});
