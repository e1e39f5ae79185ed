/**
 * The MySQL store over a test database (test/support/mysql-server.ts), migrated once: what the
 * contract suite, the traces and the process tests share.
 */
import { type MysqlStore, mysqlStore, type MysqlStoreOptions } from "../../packages/mysql/src/index.ts";
import type { StoreHarness } from "../stores/store-contract.ts";
import { mysqlDatabase, type MysqlTestDatabase } from "../support/mysql-server.ts";

/** Where each method takes its `nowMs`. */
const NOW_AT: Record<string, number> = {
  consume: 3,
  consumeMany: 2,
  peek: 2,
  refund: 3,
  reserve: 3,
  settle: 4,
  lease: 3,
  penalty: 3,
  block: 3,
};

export interface MysqlHarness extends StoreHarness {
  readonly db: MysqlTestDatabase;
  store(clock: "server" | "local", options?: Partial<MysqlStoreOptions>): MysqlStore;
}

/** A migrated test database and its stores; undefined when no server can be had (the suite skips). */
export async function mysqlHarness(): Promise<MysqlHarness | undefined> {
  const db = await mysqlDatabase();
  if (db === undefined) return undefined;
  const pool = db.pool();
  await mysqlStore({ client: pool, database: db.database }).migrate();
  // The time of the latest call, for `pttl`: rows hold absolute expiries, on the server's clock
  // or on the time a "local" store was handed.
  let lastNowMs: () => number = Date.now;
  const track = (store: MysqlStore, clock: "server" | "local"): MysqlStore =>
    new Proxy(store, {
      get(target, name, receiver) {
        const value = Reflect.get(target, name, receiver);
        if (typeof value !== "function") return value;
        return (...args: unknown[]) => {
          const at = NOW_AT[name as string];
          if (at !== undefined) {
            const now = args[at] as number;
            lastNowMs = clock === "local" ? () => now : Date.now;
          }
          return (value as (...a: unknown[]) => unknown).apply(target, args);
        };
      },
    });
  return {
    db,
    store: (clock, options = {}) => track(mysqlStore({ client: pool, database: db.database, clock, sweepEvery: 0, ...options }), clock),
    async pttl(keys) {
      const [rows] = await pool.query(`SELECT k, expires_us FROM \`${db.database}\`.floodgate WHERE k IN (?)`, [keys]);
      const nowUs = lastNowMs() * 1000;
      const found = new Map((rows as { k: Buffer; expires_us: number }[]).map((r) => [r.k.toString("utf8"), Number(r.expires_us)]));
      return keys.map((k) => {
        const at = found.get(k);
        return at === undefined || at <= nowUs ? -2 : Math.ceil((at - nowUs) / 1000);
      });
    },
    close: () => db.drop(),
  };
}
