import { FloodgateError } from "@floodgate/core/store";
import { isIdentifier, type SchemaOptions } from "./migration.ts";

/** Options of {@link mysqlStore}. */
export interface MysqlStoreOptions extends SchemaOptions {
  /**
   * A mysql2 pool (recommended) or connection, of the promise API (`mysql2/promise`) or the
   * callback one. Its sessions must be in autocommit mode (mysql2's default): each call runs
   * its own transaction. The store never ends it.
   */
  client: unknown;
  /**
   * Whose clock decides: `"server"` (default) reads the database server's clock inside the
   * procedure, so instances with skewed clocks agree; `"local"` uses the time the limiter passes
   * (its `clock` option), e.g. to replay traces in tests.
   */
  clock?: "server" | "local";
  /** Every this many writing calls, the call also deletes a few rows expired more than a minute ago (default 16; 0: never). */
  sweepEvery?: number;
  /** Most expired rows such a call deletes (default 64). */
  sweepRows?: number;
}

const whole = (v: unknown, min: number, max: number): boolean => typeof v === "number" && Number.isInteger(v) && v >= min && v <= max;

const SPECS: { readonly [K in keyof MysqlStoreOptions]-?: [(v: unknown) => boolean, string] } = {
  client: [(v) => typeof v === "object" && v !== null, "a mysql2 pool or connection"],
  database: [isIdentifier, "a database name of letters, digits, _ and $ (at most 48 characters, not starting with a digit)"],
  table: [isIdentifier, "a table name of letters, digits, _ and $ (at most 48 characters, not starting with a digit)"],
  clock: [(v) => v === "server" || v === "local", '"server" (default) or "local"'],
  sweepEvery: [(v) => whole(v, 0, 1_000_000), "a whole number from 0 (never) to 1000000 (default 16)"],
  sweepRows: [(v) => whole(v, 1, 100_000), "a whole number from 1 to 100000 (default 64)"],
};

/** Checks `mysqlStore()`'s options: a clear INVALID_OPTION for anything it would not accept. */
export function parseStoreOptions(options: unknown): MysqlStoreOptions {
  if (typeof options !== "object" || options === null) {
    throw new FloodgateError("INVALID_OPTION", "mysqlStore(): expected an options object, e.g. `mysqlStore({ client: pool })`.");
  }
  for (const [name, value] of Object.entries(options)) {
    const spec = SPECS[name as keyof MysqlStoreOptions];
    if (spec === undefined) {
      throw new FloodgateError("INVALID_OPTION", `mysqlStore(): unknown option \`${name}\`; accepted: ${Object.keys(SPECS).join(", ")}.`);
    }
    if (value !== undefined && !spec[0](value)) {
      throw new FloodgateError("INVALID_OPTION", `mysqlStore(): \`${name}\` must be ${spec[1]}.`);
    }
  }
  if ((options as MysqlStoreOptions).client === undefined) {
    throw new FloodgateError("INVALID_OPTION", "mysqlStore(): `client` is required: a mysql2 pool or connection.");
  }
  return options as MysqlStoreOptions;
}
