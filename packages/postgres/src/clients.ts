import { FloodgateError } from "@floodgate/core/store";

/*
 * The two clients, behind one call: run a statement with parameters, answer the first column of
 * the first row. Neither is imported: the store takes the client the app already has, and only
 * its shape is described here (so an app's types need neither package).
 */

/** What the store needs of node-postgres: a `Pool`, a `Client` or a `PoolClient` (`pg`). */
export interface PgClientLike {
  /** Runs one statement (named: prepared once per connection); the store reads its rows as arrays. */
  query(config: { name?: string; text: string; values: unknown[]; rowMode: "array" }): Promise<PgArrayResult>;
}

/** A node-postgres result in `rowMode: "array"`. */
export interface PgArrayResult {
  /** Each row as an array of its columns. */
  rows: unknown[][];
}

/** A postgres.js query: a promise of its rows that can also answer them as arrays of columns. */
export interface PostgresJsQuery extends PromiseLike<unknown> {
  /** The rows as arrays of their columns. */
  values(): PromiseLike<unknown[][]>;
}

/** What the store needs of postgres.js: the `sql` function `postgres()` returns (or a `reserve()`d one). */
export interface PostgresJsLike {
  /** Runs one statement with parameters (prepared once per connection with `prepare`). */
  unsafe(query: string, parameters?: unknown[], options?: { prepare?: boolean }): PostgresJsQuery;
}

/** One statement, one round trip: answers the first column of the first row (undefined without rows). */
export type Runner = (name: string, text: string, values: unknown[]) => Promise<unknown>;

/** Which client was passed: postgres.js's `sql` is a function with `unsafe`, node-postgres' pools and clients have `query`. */
export function clientKind(client: unknown): "pg" | "postgres" | undefined {
  if (typeof client === "function" && typeof (client as Partial<PostgresJsLike>).unsafe === "function") return "postgres";
  if (typeof client === "object" && client !== null && typeof (client as Partial<PgClientLike>).query === "function") return "pg";
  return undefined;
}

/**
 * The runner for a client. `prepare`: named prepared statements (node-postgres) or postgres.js's
 * own preparation: parsed and planned once per connection, then only bound and executed.
 */
export function runnerOf(client: PgClientLike | PostgresJsLike, kind: "pg" | "postgres", prepare: boolean): Runner {
  if (kind === "postgres") {
    const sql = client as PostgresJsLike;
    return async (_name, text, values) => (await sql.unsafe(text, values, { prepare }).values())[0]?.[0];
  }
  const pg = client as PgClientLike;
  return async (name, text, values) =>
    (await pg.query(prepare ? { name, text, values, rowMode: "array" } : { text, values, rowMode: "array" })).rows[0]?.[0];
}

/** A float8[] parameter, as PostgreSQL's array literal (both clients send it as text). */
export const floats = (values: readonly number[]): string => `{${values.join(",")}}`;

/** A text[] parameter, as an array literal with every element quoted. */
export const texts = (values: readonly string[]): string => `{${values.map((v) => `"${v.replace(/[\\"]/g, (c) => `\\${c}`)}"`).join(",")}}`;

/** SQLSTATEs that mean the database is not set up for the store (not a passing failure). */
const SETUP_PROBLEMS: Readonly<Record<string, string>> = {
  "3F000": "missing",
  "42P01": "missing",
  "42883": "missing",
  "25006": "read-only",
  "42501": "privileges",
};

/** The error a failed call becomes: a FloodgateError naming the fix when the database is not set up for the store. */
export function storeError(where: string, op: string, error: unknown, schema: string, table: string): FloodgateError {
  if (error instanceof FloodgateError) return error;
  const code = (error as { code?: unknown } | null)?.code;
  const message = error instanceof Error ? error.message : String(error);
  const problem = typeof code === "string" ? SETUP_PROBLEMS[code] : undefined;
  let text: string;
  if (problem === "missing") {
    text =
      `${where}: ${op} failed because the store's tables or functions are missing in schema "${schema}" (${message}). Run \`await store.migrate()\` once (or apply the SQL that \`migrationSql({ schema: "${schema}", table: "${table}" })\` prints; the default one ships in the package as sql/migration.sql), or pass the \`schema\`/\`table\` the migration used.`;
  } else if (problem === "read-only") {
    text =
      `${where}: ${op} failed because the server is read-only (a replica, or default_transaction_read_only): every decision writes. Connect the store to the primary (${message}).`;
  } else if (problem === "privileges") {
    text =
      `${where}: ${op} failed because the database role lacks privileges (${message}). Grant it USAGE on schema "${schema}", EXECUTE on its ${table}_* functions and SELECT, INSERT, UPDATE, DELETE on ${schema}.${table} and ${schema}.${table}_ledger (or run the functions' owner role).`;
  } else text = `${where}: ${op} failed: ${message}`;
  return new FloodgateError("STORE_ERROR", text, { cause: error });
}
