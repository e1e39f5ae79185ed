/**
 * Deno KV for the suites of test/deno-kv: under Deno, `Deno.openKv()` (run with --unstable-kv);
 * under Node, @deno/kv's `openKv()`, the same local SQLite backend. Each database is a file in a
 * fresh temporary folder.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { KvDatabase } from "../../packages/deno-kv/src/index.ts";

/** A Deno KV database the caller closes. */
export type ClosableKv = KvDatabase & { close(): void };

declare const Deno: { openKv?(path?: string): Promise<ClosableKv>; version?: { deno: string } } | undefined;

/** Which runtime opens the databases: "deno" (Deno.openKv) or "node" (@deno/kv). */
export const runtime: "deno" | "node" = typeof Deno !== "undefined" && Deno.version !== undefined ? "deno" : "node";

/** A path for a new database file. */
export function databasePath(): string {
  return join(mkdtempSync(join(tmpdir(), "floodgate-kv-")), "kv.sqlite3");
}

/** Opens the database at `path` (a new one when omitted). */
export async function openKv(path: string = databasePath()): Promise<ClosableKv> {
  if (runtime === "deno") {
    if (typeof Deno?.openKv !== "function") throw new Error("Deno.openKv is missing: run deno with --unstable-kv");
    return await Deno.openKv(path);
  }
  const { openKv: open } = await import("@deno/kv");
  return await open(path) as unknown as ClosableKv;
}
