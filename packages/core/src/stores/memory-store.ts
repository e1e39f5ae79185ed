import { type OptionSpecs, parseOptions, range } from "../validation.ts";
import { MAX_KEYS } from "./memory/layout.ts";
import { MemoryStoreImpl } from "./memory/store.ts";
import type { MemoryStore, MemoryStoreOptions } from "./memory/types.ts";

export type { MemoryStore, MemoryStoreOptions } from "./memory/types.ts";

const DEFAULT_MAX_KEYS = 100_000;
const OPTIONS: OptionSpecs = {
  maxKeys: /* @__PURE__ */ range("a whole number", 1, MAX_KEYS),
  maxReservations: /* @__PURE__ */ range("a whole number", 1, 100_000_000),
};

/**
 * Creates the in-memory store: the default when a limiter is given none. Safe at global scope on
 * edge runtimes (no timer, no I/O); expired entries are swept lazily, only when the store is full.
 *
 * @param options.maxKeys - most identifiers held (default 100,000)
 * @example
 * const limiter = createRateLimiter({ policy: slidingWindow({ limit: 100, window: "1m" }), store: memoryStore({ maxKeys: 50_000 }) });
 */
export function memoryStore(options: MemoryStoreOptions = {}): MemoryStore {
  const { maxKeys = DEFAULT_MAX_KEYS, maxReservations = DEFAULT_MAX_KEYS } = parseOptions<MemoryStoreOptions>(
    options,
    "memoryStore()",
    OPTIONS,
  );
  return new MemoryStoreImpl(maxKeys, maxReservations);
}
