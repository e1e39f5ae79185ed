/**
 * The PostgreSQL store over each client, on a database of the test's own (see
 * test/support/postgres-server.ts), migrated once.
 */
import pg from "pg";
import postgres from "postgres";
import { type PostgresStore, postgresStore, type PostgresStoreOptions } from "../../packages/postgres/src/index.ts";
import { type TestDatabase, testDatabase } from "../support/postgres-server.ts";

export type ClientName = "pg" | "postgres.js";
export const CLIENTS: readonly ClientName[] = ["pg", "postgres.js"];

export interface PostgresHarness {
  readonly db: TestDatabase;
  /** A store on this database through the harness's client. */
  store(clock: "server" | "local", options?: Omit<PostgresStoreOptions, "client">): PostgresStore;
  /** Runs SQL as the superuser on this database (for inspecting rows). */
  query<T = Record<string, unknown>>(text: string, values?: unknown[]): Promise<T[]>;
  close(): Promise<void>;
}

/** A database, a pool of `client` on it, the migration run (`unlogged`: its tables UNLOGGED). */
export async function postgresHarness(client: ClientName, poolSize = 10, unlogged = false): Promise<PostgresHarness> {
  const db = await testDatabase();
  const admin = new pg.Pool({ ...db.connection, max: 2 });
  // Dropping the database ends idle connections: the pools report it here (else it would throw).
  admin.on("error", () => undefined);
  let connection: pg.Pool | postgres.Sql;
  if (client === "pg") {
    const pool = new pg.Pool({ ...db.connection, max: poolSize });
    pool.on("error", () => undefined);
    connection = pool;
  } else connection = postgres({ ...db.connection, max: poolSize, onnotice: () => undefined });
  const make = (clock: "server" | "local", options: Omit<PostgresStoreOptions, "client"> = {}): PostgresStore =>
    postgresStore({ client: connection, clock, ...options });
  try {
    await make("server", { unlogged }).migrate();
  } catch (error) {
    // The database is this run's: dropped even when the setup fails.
    if (client === "pg") await (connection as pg.Pool).end();
    else await (connection as postgres.Sql).end({ timeout: 5 });
    await admin.end();
    await db.drop();
    throw error;
  }
  return {
    db,
    store: make,
    async query<T>(text: string, values: unknown[] = []): Promise<T[]> {
      return (await admin.query(text, values)).rows as T[];
    },
    async close() {
      if (client === "pg") await (connection as pg.Pool).end();
      else await (connection as postgres.Sql).end({ timeout: 5 });
      await admin.end();
      await db.drop();
    },
  };
}
