import { FloodgateError } from "@floodgate/core/store";
import type { ObjectState } from "./object-state.ts";

/*
 * The object's keys in one SQLite table: the state as JSON text and when it expires on the
 * object's clock. The alarm is kept at the earliest expiry, and each time it rings deletes what
 * has expired, so the table holds only keys that still matter. Every statement is synchronous:
 * a decision reads and writes with nothing awaited in between, so no other call interleaves.
 */

const TABLE = "floodgate_state";

/** One row: the key's state (JSON) and its expiry on the object's clock (epoch ms). */
interface Row {
  readonly value: string;
  readonly expiresAt: number;
}

/** The object's table of key states and its alarm. */
export class StateTable {
  readonly #ctx: ObjectState;
  readonly #sql: NonNullable<ObjectState["storage"]["sql"]>;
  /** When the alarm rings (epoch ms), null when none is set; read once at start-up. */
  #alarmAt: number | null = null;
  /** Times the alarm has run in this instance of the object. */
  alarms = 0;

  constructor(ctx: ObjectState) {
    const sql = ctx.storage.sql;
    if (sql === undefined) {
      throw new FloodgateError(
        "STORE_ERROR",
        "RateLimiterObject: this Durable Object has no SQLite storage; declare its class under `new_sqlite_classes` in the Worker's migrations (wrangler.toml or wrangler.jsonc).",
      );
    }
    this.#ctx = ctx;
    this.#sql = sql;
    sql.exec(
      `CREATE TABLE IF NOT EXISTS ${TABLE} (k TEXT PRIMARY KEY, v TEXT NOT NULL, expires_at INTEGER NOT NULL) WITHOUT ROWID`,
    );
    sql.exec(
      `CREATE INDEX IF NOT EXISTS ${TABLE}_expiry ON ${TABLE} (expires_at)`,
    );
    void ctx.blockConcurrencyWhile(async () => {
      this.#alarmAt = await ctx.storage.getAlarm();
    });
  }

  /** The key's row, or undefined when it has none or its row has expired at `nowMs` (the alarm has yet to delete it). */
  read(key: string, nowMs: number): Row | undefined {
    const row = this.#sql.exec(`SELECT v, expires_at FROM ${TABLE} WHERE k = ?`, key)
      .toArray()[0];
    if (row === undefined || (row.expires_at as number) <= nowMs) {
      return undefined;
    }
    return { value: row.v as string, expiresAt: row.expires_at as number };
  }

  /** Writes the key's state, expiring at `expiresAt` (epoch ms, the object's clock); the alarm moves earlier when needed. */
  write(
    key: string,
    value: string,
    expiresAt: number,
  ): Promise<void> | undefined {
    this.#sql.exec(
      `INSERT OR REPLACE INTO ${TABLE} (k, v, expires_at) VALUES (?, ?, ?)`,
      key,
      value,
      expiresAt,
    );
    if (this.#alarmAt !== null && this.#alarmAt <= expiresAt) return undefined;
    this.#alarmAt = expiresAt;
    return this.#ctx.storage.setAlarm(expiresAt);
  }

  /** Deletes the key's row. */
  delete(key: string): void {
    this.#sql.exec(`DELETE FROM ${TABLE} WHERE k = ?`, key);
  }

  /** How many keys the table holds (expired rows the alarm has yet to delete included). */
  size(): number {
    return this.#sql.exec(`SELECT count(*) AS n FROM ${TABLE}`).toArray()[0]!
      .n as number;
  }

  /** The alarm's work: deletes the rows expired at `nowMs`, then sets the alarm at the next expiry (none when the table is empty). */
  async expire(nowMs: number): Promise<void> {
    this.alarms++;
    this.#sql.exec(`DELETE FROM ${TABLE} WHERE expires_at <= ?`, nowMs);
    const next = this.#sql.exec(`SELECT min(expires_at) AS at FROM ${TABLE}`)
      .toArray()[0]?.at;
    // A rung alarm is no longer set; a write may have set an earlier one meanwhile (then #alarmAt is not null).
    this.#alarmAt = typeof next === "number" ? next : null;
    if (this.#alarmAt !== null) await this.#ctx.storage.setAlarm(this.#alarmAt);
  }
}
