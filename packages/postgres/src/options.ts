import { FloodgateError } from "@floodgate/core/store";
import { clientKind, type PgClientLike, type PostgresJsLike } from "./clients.ts";

/** Options of {@link postgresStore}. */
export interface PostgresStoreOptions {
  /**
   * The connection to use, the app's own: a node-postgres `Pool` or `Client` (`pg`), or the `sql`
   * function of postgres.js (`postgres`). With an ORM, pass the client under it (Drizzle:
   * `db.$client`). The store never opens or closes connections.
   */
  client: PgClientLike | PostgresJsLike;
  /** The schema holding the store's tables and functions (default `"floodgate"`). */
  schema?: string;
  /** The state table's name (default `"limits"`); the ledger is `<table>_ledger`, the functions `<table>_<operation>`. */
  table?: string;
  /**
   * Whose clock decides: `"server"` (default) reads the database's `clock_timestamp()` inside
   * each call, so instances with skewed clocks agree; `"local"` uses the time the limiter passes.
   */
  clock?: "server" | "local";
  /**
   * Use prepared statements (default true): each connection parses and plans a statement once.
   * Set false behind a pooler in transaction mode that does not track them (PgBouncer before 1.21).
   */
  prepare?: boolean;
  /** `migrate()` creates the tables UNLOGGED (default false): cheaper writes, emptied by a crash. See docs/sql.md. */
  unlogged?: boolean;
  /** Every this many charging calls of this store, one also deletes up to `sweepBatch` expired rows (default 1000; 0: never). */
  sweepEvery?: number;
  /** Rows of each table a piggy-backed sweep deletes at most (default 100). */
  sweepBatch?: number;
}

const whole = (v: unknown, min: number, max: number): boolean => typeof v === "number" && Number.isInteger(v) && v >= min && v <= max;

/** Checks the options: a FloodgateError naming the option, what it got and what is accepted. */
export function checkOptions(options: PostgresStoreOptions): PostgresStoreOptions {
  const fail = (what: string, accepted: string, got: unknown): never => {
    throw new FloodgateError("INVALID_OPTION", `postgresStore(): \`${what}\` must be ${accepted}; got ${describe(got)}.`);
  };
  if (typeof options !== "object" || options === null) fail("options", "an object with a `client`", options);
  const o = options as unknown as Record<string, unknown>;
  const known = ["client", "schema", "table", "clock", "prepare", "unlogged", "sweepEvery", "sweepBatch"];
  for (const name of Object.keys(o)) {
    if (!known.includes(name)) fail(name, `one of the options (${known.join(", ")}); it is not one`, o[name]);
  }
  if (clientKind(o.client) === undefined) {
    fail("client", "a node-postgres Pool or Client (pg), or the sql function of postgres.js (postgres)", o.client);
  }
  if (o.clock !== undefined && o.clock !== "server" && o.clock !== "local") fail("clock", '"server" (default) or "local"', o.clock);
  for (const flag of ["prepare", "unlogged"]) {
    if (o[flag] !== undefined && typeof o[flag] !== "boolean") fail(flag, "true or false", o[flag]);
  }
  if (o.sweepEvery !== undefined && !whole(o.sweepEvery, 0, 1e9)) {
    fail("sweepEvery", "a whole number from 0 (never) to 1000000000", o.sweepEvery);
  }
  if (o.sweepBatch !== undefined && !whole(o.sweepBatch, 1, 1e6)) fail("sweepBatch", "a whole number from 1 to 1000000", o.sweepBatch);
  return options;
}

function describe(value: unknown): string {
  if (typeof value === "function") return "a function without `unsafe`";
  if (typeof value === "object" && value !== null) return Array.isArray(value) ? "an array" : "an object without `query`";
  return typeof value === "string" ? JSON.stringify(value) : String(value);
}
