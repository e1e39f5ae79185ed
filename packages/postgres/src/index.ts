/**
 * A Floodgate store in PostgreSQL, over node-postgres (`pg`) or postgres.js (`postgres`): every
 * algorithm, several policies in one atomic step, refunds, reservations, leases and blocks, one
 * round trip per decision, on the database's clock. docs/sql.md is the guide.
 *
 * @module @floodgate/postgres
 */
export { type PostgresStore, postgresStore } from "./store.ts";
export type { PostgresStoreOptions } from "./options.ts";
export type { PgArrayResult, PgClientLike, PostgresJsLike, PostgresJsQuery } from "./clients.ts";
export { type MigrationOptions, migrationSql, SCHEMA_VERSION, type SqlNames } from "./sql/migration.ts";
