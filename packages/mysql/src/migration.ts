import { kernelProcedures, type Names } from "./sql/kernel.ts";
import { leaseProcedure } from "./sql/lease.ts";
import { consumeManyProcedure } from "./sql/many.ts";
import { publicProcedures } from "./sql/procedures.ts";
import { sweepProcedure } from "./sql/common.ts";
import { consumeOneProcedure, ONE_KINDS, oneProcedure } from "./sql/consume-one.ts";

/**
 * The schema's version: it names the procedures (`<table>_v1_consume`...), so a later version's
 * migration adds its own beside these and instances not yet upgraded keep working.
 */
export const SCHEMA_VERSION = 1;

/** Where the store's objects live. */
export interface SchemaOptions {
  /** The database (schema) holding the table and procedures; default: the connection's. */
  database?: string;
  /** The table's name, which prefixes the procedures' (default `"floodgate"`). */
  table?: string;
}

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_$]{0,47}$/;

/** Whether `name` is accepted as a table's or a database's name. */
export const isIdentifier = (name: unknown): name is string => typeof name === "string" && IDENTIFIER.test(name);

/** The names of one table's objects. */
export function namesOf(options: SchemaOptions = {}): Names & { readonly procedure: (name: string) => string } {
  const table = options.table ?? "floodgate";
  const db = options.database === undefined ? "" : `\`${options.database}\`.`;
  const local = (name: string): string => `\`${table}_v${SCHEMA_VERSION}_${name}\``;
  return {
    table: `\`${table}\``,
    create: (name) => `${db}${local(name)}`,
    local,
    procedure: (name) => `${db}${local(name)}`,
  };
}

/** The procedures' names without version or table, in the order they are created. */
const PROCEDURES = [
  "load",
  "save",
  "apply",
  "refund_one",
  "settle_one",
  "sweep",
  "consume",
  "refund",
  "settle",
  "penalty",
  "block",
  "lease",
  "consume_many",
  ...ONE_KINDS.map((k) => oneProcedure(k.code)),
];

/**
 * The migration as statements, each to be sent alone: the table (created when missing), then
 * every procedure, dropped and created again. Running it twice changes nothing.
 */
export function migrationStatements(options: SchemaOptions = {}): string[] {
  const n = namesOf(options);
  const table = `${options.database === undefined ? "" : `\`${options.database}\`.`}${n.table}`;
  const bodies = [
    ...kernelProcedures(n),
    sweepProcedure(n),
    ...publicProcedures(n),
    leaseProcedure(n),
    consumeManyProcedure(n),
    ...ONE_KINDS.map((k) => consumeOneProcedure(n, k)),
  ];
  const statements = [
    `CREATE TABLE IF NOT EXISTS ${table} (
  k VARBINARY(3072) NOT NULL COMMENT 'prefix{identifier}, then :1, :2... per policy, :b its block, :r:<id> a reservation, :l:<id> a lease',
  kind CHAR(1) CHARACTER SET ascii COLLATE ascii_bin NOT NULL COMMENT 'policy kind letter, or b, r, l',
  n1 BIGINT NOT NULL DEFAULT 0,
  n2 BIGINT NOT NULL DEFAULT 0,
  n3 BIGINT NOT NULL DEFAULT 0,
  entries LONGBLOB NULL COMMENT 'a sliding log: 8-byte big-endian µs timestamps, oldest first',
  expires_us BIGINT NOT NULL COMMENT 'epoch µs after which the row is no state: swept',
  PRIMARY KEY (k),
  KEY ${`\`${options.table ?? "floodgate"}_expires\``} (expires_us)
) ENGINE=InnoDB`,
  ];
  PROCEDURES.forEach((name, i) => {
    statements.push(`DROP PROCEDURE IF EXISTS ${n.create(name)}`, bodies[i]!);
  });
  return statements;
}

/**
 * The migration as one script for the `mysql`/`mariadb` command-line client (procedures framed
 * by `DELIMITER`), e.g. to review or to run by hand: `mysql app < floodgate.sql`.
 */
export function migrationSql(options: SchemaOptions = {}): string {
  const lines = [
    `-- Floodgate rate-limit store for MySQL 8 / MariaDB 10.6+, schema version ${SCHEMA_VERSION}.`,
    "-- Idempotent: creates the table when missing and (re)creates the procedures.",
    "DELIMITER $$",
  ];
  for (const statement of migrationStatements(options)) lines.push(`${statement}$$`, "");
  lines.push("DELIMITER ;", "");
  return lines.join("\n");
}
