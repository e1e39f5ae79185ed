/*
 * What the object uses of its state, written out so that the package type-checks without
 * Cloudflare's type packages: SQLite-backed storage (`sql.exec`), the alarm, and the start-up gate.
 */

/** A cursor over the rows of one SQL statement. */
export interface SqlCursor {
  /** Every row, as objects keyed by column. */
  toArray(): Record<string, unknown>[];
}

/** The state a Durable Object is constructed with (the fields the rate limiter's object reads). */
export interface ObjectState {
  /** The object's storage. */
  readonly storage: {
    /** SQLite: present when the class is declared under `new_sqlite_classes` in the Worker's migrations. */
    readonly sql?: {
      /** Runs one SQL statement with its `?` bindings. */
      exec(query: string, ...bindings: unknown[]): SqlCursor;
    };
    /** When the alarm is set for (epoch ms), or null. */
    getAlarm(): Promise<number | null>;
    /** Sets (replaces) the object's one alarm. */
    setAlarm(scheduledTime: number): Promise<void>;
    /** Removes the object's alarm. */
    deleteAlarm(): Promise<void>;
  };
  /** Runs `callback` before any other event is delivered to the object. */
  blockConcurrencyWhile<T>(callback: () => Promise<T>): Promise<T>;
}
