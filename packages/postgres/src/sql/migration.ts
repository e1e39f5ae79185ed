import { FloodgateError } from "@floodgate/core/store";
import { FUNCTIONS } from "./functions.ts";

/** The version of the schema this package writes and calls; `<table>_version()` answers it. */
export const SCHEMA_VERSION = 4;

/** Where the store's objects live: a schema and the base name of its tables and functions. */
export interface SqlNames {
  /** The schema (default `"floodgate"`): a lower-case SQL identifier. */
  readonly schema: string;
  /** The state table's name (default `"limits"`); the ledger is `<table>_ledger`, the functions `<table>_<operation>`. */
  readonly table: string;
}

/** Options of {@link migrationSql}. */
export interface MigrationOptions extends Partial<SqlNames> {
  /**
   * Create the tables UNLOGGED (default false): writes skip the write-ahead log, so decisions
   * cost less, but a crash of the server (not a clean restart) empties them and replicas do not
   * have them. Applies when the tables are created; `ALTER TABLE ... SET LOGGED` changes it later.
   */
  readonly unlogged?: boolean;
}

const IDENTIFIER = /^[a-z_][a-z0-9_]*$/;

/** Checks a schema or table name: lower-case letters, digits and `_`, starting with a letter or `_`. */
export function checkIdentifier(where: string, what: string, value: unknown, max: number): string {
  if (typeof value !== "string" || !IDENTIFIER.test(value) || value.length > max) {
    throw new FloodgateError(
      "INVALID_OPTION",
      `${where}: \`${what}\` must be a lower-case SQL identifier (a-z, 0-9 and _, not starting with a digit, at most ${max} characters); got ${
        JSON.stringify(value)
      }.`,
    );
  }
  return value;
}

/** The schema and table names, checked, with their defaults. */
export function sqlNames(where: string, options: Partial<SqlNames>): SqlNames {
  return {
    schema: checkIdentifier(where, "schema", options.schema ?? "floodgate", 63),
    // Room for the longest suffix, "_ledger_expires_at_us".
    table: checkIdentifier(where, "table", options.table ?? "limits", 40),
  };
}

/** Replaces the `@S` and `@T` placeholders. */
export const named = (sql: string, names: SqlNames): string => sql.replaceAll("@S", names.schema).replaceAll("@T", names.table);

const TABLES = (unlogged: boolean): string => {
  const kind = unlogged ? "UNLOGGED TABLE" : "TABLE";
  return `CREATE SCHEMA IF NOT EXISTS @S;

-- One row per identifier and limiter (key = prefix{identifier}). One counter policy (token
-- bucket, fixed window, sliding window) keeps its numbers in num1..num3, nums NULL; any other set
-- every policy's numbers in nums, the sliding logs' entries in logs. blocked_until_us: the end of
-- a block (NULL: none); expires_at_us, when the row stops mattering (µs since the epoch).
-- fillfactor leaves room for updates in place.
CREATE ${kind} IF NOT EXISTS @S.@T (
  key text COLLATE "C" PRIMARY KEY,
  set_kinds text NOT NULL,
  nums float8[],
  logs float8[],
  blocked_until_us float8,
  expires_at_us float8 NOT NULL,
  num1 float8,
  num2 float8,
  num3 float8
) WITH (fillfactor = 70);
-- From schema version 1 or 2: the plain columns added, nothing rewritten. Rows keep their numbers
-- in nums, which every function still reads; a charge moves a counter policy's row to num1..num3.
DO $mig$ BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = '@S.@T'::regclass AND attname = 'num1' AND NOT attisdropped) THEN
    ALTER TABLE @S.@T ADD COLUMN num1 float8, ADD COLUMN num2 float8, ADD COLUMN num3 float8,
      ALTER COLUMN nums DROP NOT NULL, ALTER COLUMN blocked_until_us DROP NOT NULL, ALTER COLUMN blocked_until_us DROP DEFAULT;
  END IF;
  -- Version 1 and 2's consume (its first argument named k) is replaced by one whose first argument
  -- is named ky: an older version's migration, which would put back functions that do not read
  -- num1..num3, then fails (PostgreSQL refuses to rename an argument) instead of downgrading them.
  IF EXISTS (SELECT 1 FROM pg_proc WHERE oid = to_regprocedure('@S.@T_consume(text, text, float8[], float8[], float8[], float8, float8, text, float8, int)')
      AND proargnames[1] = 'k') THEN
    DROP FUNCTION @S.@T_consume(text, text, float8[], float8[], float8[], float8, float8, text, float8, int);
  END IF;
END $mig$;
CREATE INDEX IF NOT EXISTS @T_expires_at_us ON @S.@T (expires_at_us);

-- Reservations and leases outstanding: per key and id, what was charged and where.
CREATE ${kind} IF NOT EXISTS @S.@T_ledger (
  key text COLLATE "C" NOT NULL,
  id text COLLATE "C" NOT NULL,
  rec float8[] NOT NULL,
  expires_at_us float8 NOT NULL,
  PRIMARY KEY (key, id)
);
CREATE INDEX IF NOT EXISTS @T_ledger_expires_at_us ON @S.@T_ledger (expires_at_us);
`;
};

const VERSION = `CREATE OR REPLACE FUNCTION @S.@T_version() RETURNS int LANGUAGE sql IMMUTABLE AS $fn$ SELECT ${SCHEMA_VERSION} $fn$;
`;

/**
 * The whole migration: the schema, both tables and every function, idempotent (run it again, or
 * after an upgrade of this package: tables are kept, functions replaced). Within one
 * transaction; a session-level advisory lock keeps two migrating processes from racing.
 *
 * @example
 * import { migrationSql } from "@floodgate/postgres";
 * console.log(migrationSql({ schema: "ratelimit" }));
 */
export function migrationSql(options: MigrationOptions = {}): string {
  return `-- Floodgate PostgreSQL store, schema version ${SCHEMA_VERSION}.\nBEGIN;\n${migrationBody("migrationSql()", options)}COMMIT;\n`;
}

/** The migration's statements without BEGIN/COMMIT, for a client that opens the transaction itself. */
export function migrationBody(where: string, options: MigrationOptions): string {
  const names = sqlNames(where, options);
  const body = [TABLES(options.unlogged === true), ...FUNCTIONS, VERSION].join("\n");
  return named(`SELECT pg_advisory_xact_lock(hashtext('floodgate:@S.@T'));\n${body}`, names);
}
