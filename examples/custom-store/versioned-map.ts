import type { CompareAndSetKV } from "./kv-store.ts";

/**
 * The stand-in database: a Map of (value, version), every call a promise that settles after a
 * random number of microtask turns, so that reads and writes of concurrent callers interleave.
 * It ignores `expiresAtMs` (the contract drives time through injected clocks); a real database
 * would take it as the key's TTL.
 */
export class VersionedMap implements CompareAndSetKV {
  readonly #entries = new Map<string, { value: string; version: number }>();
  #nextVersion = 1;

  async get(key: string): Promise<{ value: string | undefined; version: number }> {
    await latency();
    const entry = this.#entries.get(key);
    return entry === undefined ? { value: undefined, version: 0 } : { value: entry.value, version: entry.version };
  }

  async setIf(key: string, version: number, value: string | undefined, _expiresAtMs: number): Promise<boolean> {
    await latency();
    // From here to the write nothing awaits: the check and the write are one atomic step.
    if ((this.#entries.get(key)?.version ?? 0) !== version) return false;
    if (value === undefined) this.#entries.delete(key);
    else this.#entries.set(key, { value, version: this.#nextVersion++ });
    return true;
  }

  async delete(key: string): Promise<void> {
    await latency();
    this.#entries.delete(key);
  }

  /** Writes a raw value, as another program sharing the database might. */
  put(key: string, value: string): void {
    this.#entries.set(key, { value, version: this.#nextVersion++ });
  }
}

async function latency(): Promise<void> {
  const turns = Math.floor(Math.random() * 4);
  for (let i = 0; i < turns; i++) await Promise.resolve();
}
