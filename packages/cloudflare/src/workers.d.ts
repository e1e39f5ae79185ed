/*
 * The part of workerd's own module that the object class uses. Workers projects get the full
 * declaration from @cloudflare/workers-types or `wrangler types`; this one lets the package
 * type-check without them.
 */
declare module "cloudflare:workers" {
  /** Base class of a Durable Object that serves RPC calls. */
  export abstract class DurableObject<Env = unknown> {
    /** The object's state: its storage, its id, its concurrency controls. */
    protected ctx: import("./object-state.ts").ObjectState;
    /** The Worker's bindings. */
    protected env: Env;
    constructor(ctx: import("./object-state.ts").ObjectState, env: Env);
  }
}
