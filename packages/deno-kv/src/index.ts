/**
 * Floodgate with state in Deno KV: {@link denoKvStore}, exact decisions as check-and-set
 * commits on `Deno.openKv()` (Deno, Deno Deploy) or on @deno/kv's `openKv()` (Node).
 *
 * @module @floodgate/deno-kv
 */
export { type DenoKvStore, denoKvStore, type DenoKvStoreOptions, type DenoKvStoreStats } from "./store.ts";
export type { KvAtomic, KvDatabase, KvEntryMaybe, KvKey, KvKeyPart } from "./kv.ts";
