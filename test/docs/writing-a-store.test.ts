/**
 * docs/writing-a-store.md shows the complete example store as it is: its code block is the file
 * examples/custom-store/kv-store.ts (less the file's opening comment), which the contract suite
 * runs (test/stores/kv-store.contract.test.ts), so the guide cannot drift from a store that works.
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { expect, it } from "vitest";

const read = (path: string): string => readFileSync(fileURLToPath(new URL(`../../${path}`, import.meta.url)), "utf8");

it("the guide's complete store is examples/custom-store/kv-store.ts, character for character", () => {
  const guide = read("docs/writing-a-store.md");
  const section = guide.slice(guide.indexOf("## A complete store"));
  const block = /```ts\n([\s\S]*?)```/.exec(section)?.[1];
  const file = read("examples/custom-store/kv-store.ts");
  expect(block).toBe(file.slice(file.indexOf("import {")));
});

it("the guide imports what a store author has: the store entry, never core's source or the application entry", () => {
  const file = read("examples/custom-store/kv-store.ts");
  const imports = [...file.matchAll(/from "([^"]+)"/g)].map((m) => m[1]);
  expect(imports).toEqual(["@floodgate/core/store"]);
});
