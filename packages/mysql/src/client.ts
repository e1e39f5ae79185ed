import { FloodgateError } from "@floodgate/core/store";

/**
 * What the store needs of a mysql2 client: `query(sql, values)`. A pool or a connection of
 * mysql2's promise API (`mysql2/promise`), or of its callback API (`mysql2`, which the store
 * calls through its callbacks: no second pool, no wrapper per call).
 */
export interface MysqlClient {
  /** Sends one statement with `?` placeholders filled from `values` (mysql2's `query`). */
  query(sql: string, values?: unknown): unknown;
}

/** Runs one statement and resolves with mysql2's rows (for a CALL: its result sets, then an OK packet). */
export type Runner = (sql: string, values: readonly unknown[]) => Promise<unknown>;

const isClient = (v: unknown): v is MysqlClient => typeof (v as MysqlClient | null)?.query === "function";

/** The runner of a mysql2 client, promise or callback API. */
export function runnerOf(client: unknown): Runner {
  if (!isClient(client)) {
    throw new FloodgateError(
      "INVALID_OPTION",
      "mysqlStore(): `client` must be a mysql2 pool or connection (mysql2 or mysql2/promise), with a query() method.",
    );
  }
  // Callback clients have promise(), which makes their promise wrapper; promise clients do not.
  if (typeof (client as { promise?: unknown }).promise === "function") {
    return (sql, values) =>
      new Promise((resolve, reject) => {
        (client.query as (this: unknown, sql: string, values: unknown, callback: (error: unknown, rows: unknown) => void) => unknown).call(
          client,
          sql,
          values,
          (error, rows) => (error ? reject(error) : resolve(rows)),
        );
      });
  }
  return async (sql, values) => {
    const reply = await (client.query(sql, values) as Promise<[unknown, unknown]>);
    return reply[0];
  };
}

/** The single row's `r` column of a procedure's first result set, as a string. */
export function answerOf(rows: unknown): string | undefined {
  const sets = rows as { r?: unknown }[][] | undefined;
  const value = Array.isArray(sets) && Array.isArray(sets[0]) ? sets[0][0]?.r : undefined;
  if (typeof value === "string") return value;
  if (typeof value === "number" || typeof value === "bigint") return String(value);
  // A driver typing the column as binary hands a Buffer (or any byte array).
  if (value instanceof Uint8Array) return new TextDecoder().decode(value);
  return undefined;
}

/** mysql2's error numbers the store tells apart. */
const NO_PROCEDURE = 1305;
const NO_TABLE = 1146;
const NO_DATABASE = 1049;
const BAD_FIELD = 1054;
const DENIED = [1044, 1142, 1143, 1370];
const READ_ONLY = [1290, 1792, 1836];
/** A deadlock or a lock wait timed out: the transaction was rolled back, nothing was charged. */
export const RETRYABLE = [1213, 1205];

/** The error number of a mysql2 error, if it is one. */
export const errnoOf = (error: unknown): number | undefined => {
  const errno = (error as { errno?: unknown } | null)?.errno;
  return typeof errno === "number" ? errno : undefined;
};

/**
 * A FloodgateError naming the fix for an error that every call would meet until someone acts
 * (no migration, another table's layout, missing privileges, a read-only server); else
 * undefined.
 */
export function setupError(error: unknown, where: string, table: string): FloodgateError | undefined {
  const errno = errnoOf(error);
  const detail = error instanceof Error ? ` (${error.message})` : "";
  let message: string | undefined;
  if (errno === NO_PROCEDURE || errno === NO_TABLE) {
    message =
      `the table \`${table}\` or its procedures are missing in ${where}${detail}: run the migration once, \`await store.migrate()\` or the SQL of \`migrationSql()\` (shipped as node_modules/@floodgate/mysql/floodgate.sql).`;
  } else if (errno === NO_DATABASE) {
    message = `${where} does not exist${detail}: create it, or name another with the \`database\` option.`;
  } else if (errno === BAD_FIELD) {
    message =
      `\`${table}\` in ${where} is not a Floodgate table of this version${detail}: name another with the \`table\` option, or drop it and run \`store.migrate()\`.`;
  } else if (errno !== undefined && DENIED.includes(errno)) {
    message =
      `the user lacks a privilege in ${where}${detail}: grant it EXECUTE on the database's procedures and SELECT, INSERT, UPDATE, DELETE on \`${table}\` (and CREATE ROUTINE, ALTER ROUTINE, CREATE to migrate).`;
  } else if (errno !== undefined && READ_ONLY.includes(errno)) {
    message = `the server is read-only${detail}: a replica cannot count requests; connect the store to the primary.`;
  }
  return message === undefined ? undefined : new FloodgateError("STORE_ERROR", `mysql store: ${message}`, { cause: error });
}

/** A STORE_ERROR for any other failure of `op`. */
export function storeError(op: string, error: unknown): FloodgateError {
  if (error instanceof FloodgateError) return error;
  const message = error instanceof Error ? error.message : String(error);
  return new FloodgateError("STORE_ERROR", `mysql store: ${op} failed: ${message}`, { cause: error });
}
