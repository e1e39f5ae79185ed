/**
 * A Floodgate rate-limit store on MySQL 8 and MariaDB through mysql2: every algorithm, several
 * policies in one atomic step, reservations and leases, one round trip per decision on the
 * database's clock. See docs/sql-mysql.md.
 *
 * @module @floodgate/mysql
 */
export { type MysqlStore, mysqlStore } from "./store.ts";
export type { MysqlStoreOptions } from "./options.ts";
export type { MysqlClient } from "./client.ts";
export { migrationSql, migrationStatements, SCHEMA_VERSION, type SchemaOptions } from "./migration.ts";
