/*
 * What the store uses of a Deno KV database, written out so that the package needs neither
 * Deno's types nor @deno/kv's: `Deno.openKv()`'s `Deno.Kv` and @deno/kv's `Kv` both fit.
 */

/** A part of a Deno KV key (what this store writes: strings and byte arrays). */
export type KvKeyPart = string | number | bigint | boolean | Uint8Array;

/** A Deno KV key: a list of parts. */
export type KvKey = readonly KvKeyPart[];

/** An entry as `get` returns it: `versionstamp` is null when the key holds no value. */
export interface KvEntryMaybe {
  /** The key read. */
  readonly key: KvKey;
  /** The value, null when the key holds none. */
  readonly value: unknown;
  /** The value's version, null when the key holds none. */
  readonly versionstamp: string | null;
}

/** An atomic operation being built: checks, then mutations, committed together or not at all. */
export interface KvAtomic {
  /** Commits only if each key's versionstamp is still the one given (null: the key holds nothing). */
  check(...checks: { key: KvKey; versionstamp: string | null }[]): KvAtomic;
  /** Sets a value, removed by the database some time after `expireIn` ms. */
  set(key: KvKey, value: unknown, options?: { expireIn?: number }): KvAtomic;
  /** Deletes a key. */
  delete(key: KvKey): KvAtomic;
  /** Commits: `ok` is false when a check failed (another writer got there first). */
  commit(): Promise<{
    /** Whether the operation was committed. */
    ok: boolean;
  }>;
}

/** The Deno KV database the store works on: `await Deno.openKv()`, or `await openKv()` from @deno/kv on Node. */
export interface KvDatabase {
  /** Reads one key. */
  get(key: KvKey): Promise<KvEntryMaybe>;
  /** Reads up to 10 keys at once, consistently (a compound decision's keys; without it, one get each). */
  getMany?(keys: readonly KvKey[]): Promise<KvEntryMaybe[]>;
  /** Starts an atomic operation. */
  atomic(): KvAtomic;
  /** Deletes one key. */
  delete(key: KvKey): Promise<void>;
}
