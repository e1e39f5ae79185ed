/**
 * The memory store's heap per tracked key is its key table and its state slab, nothing more:
 * measured in a child process (test/core/memory-heap-child.ts) beside a bare `Map<string, number>`
 * of the same keys, after a full gc. Heap figures do not move with the machine's load.
 */
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { expect, it } from "vitest";

const child = fileURLToPath(new URL("./memory-heap-child.ts", import.meta.url));

it("a tracked key costs the map entry and its slot: the map's outgrown tables are not kept", async () => {
  const { stdout } = await promisify(execFile)(process.execPath, ["--expose-gc", "--import", "tsx", child, "200000"], { timeout: 60_000 });
  const figures = JSON.parse(stdout.trim().split("\n").at(-1)!) as { map: number; store: number; slab: number };
  // A live iterator over the key table (the eviction hand) made before the map fills keeps every
  // table the map outgrows: ≈ 37 B per key more at 200,000 keys.
  expect(figures.store - figures.map - figures.slab).toBeLessThan(8);
  expect(figures.store).toBeGreaterThan(figures.slab);
}, 90_000);
