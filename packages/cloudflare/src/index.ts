/**
 * Floodgate on Cloudflare Workers with state in Durable Objects: {@link RateLimiterObject}, the
 * object class a Worker exports and binds, and {@link durableObjectStore}, the store that routes
 * each key to an object over RPC. Only Workers load this package (it imports `cloudflare:workers`).
 *
 * @module @floodgate/cloudflare
 */
export { RateLimiterObject } from "./object.ts";
export {
  type DurableObjectStore,
  durableObjectStore,
  type DurableObjectStoreOptions,
  type RateLimiterNamespace,
  type RateLimiterStub,
} from "./store.ts";
export type { ObjectCall, ObjectOperation } from "./protocol.ts";
export type { ObjectState, SqlCursor } from "./object-state.ts";
