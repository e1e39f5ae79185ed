/*
 * What bench/edge/worker.ts uses of @hono-rate-limiter/cloudflare. Its own declarations load
 * @cloudflare/workers-types, whose globals clash with the DOM types the rest of the repository
 * is checked with, so the root tsconfig maps the package here.
 */
/** hono-rate-limiter's store over Durable Objects: one object per key, one RPC per hit. */
export declare class DurableObjectStore {
  constructor(options: { namespace: unknown; prefix?: string });
}
/** hono-rate-limiter's Durable Object class. */
export declare class DurableObjectRateLimiter {}
