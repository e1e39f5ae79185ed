import { type RateLimitResult, RESOLVED } from "./result.ts";

// Serverless platforms freeze or end a function once its response is sent; what Floodgate still
// does then (settlements, releases, refunds, hooks' promises) is handed to the platform's
// `waitUntil` so that it finishes.

/** Where `@vercel/functions` finds the request context (and its `waitUntil`) on Vercel. */
const VERCEL_CONTEXT = /* @__PURE__ */ Symbol.for("@vercel/request-context");

type WithWaitUntil = { waitUntil?: (promise: Promise<unknown>) => void } | null | undefined;

/**
 * Hands `result.info.pending` to the first `waitUntil` found: on one of `candidates()` (Cloudflare
 * Workers' `ExecutionContext`, Netlify's `Context`: whatever the runtime passed beside the
 * request), else on Netlify's global `Netlify.context` (the current request's `Context` in
 * Netlify Functions and Edge Functions, for a handler that did not pass its context on), else
 * on Vercel's request context. Nothing when there is nothing pending or no platform offers it
 * (Node, Bun, Deno: the process keeps running). Never throws.
 *
 * `candidates` is called only when something is pending: finding a context can cost (Hono's
 * `c.executionCtx` throws, with a stack trace, where there is none), and most requests have
 * nothing pending.
 */
export function handOffPending(result: RateLimitResult, candidates: () => readonly unknown[]): void {
  const pending = result.info.pending;
  if (pending === RESOLVED) return;
  const vercel = (globalThis as Record<symbol, { get?(): WithWaitUntil } | undefined>)[VERCEL_CONTEXT];
  for (const candidate of [...candidates(), netlifyContext(), vercel?.get?.()] as WithWaitUntil[]) {
    if (typeof candidate?.waitUntil !== "function") continue;
    try {
      candidate.waitUntil(pending);
      return;
    } catch {
      // A context past its request refuses: try the next, else the process keeps the promise alive.
    }
  }
}

/** Netlify's `Netlify.context` (`null` outside a request); `undefined` elsewhere, or if reading it throws. */
function netlifyContext(): WithWaitUntil {
  try {
    return (globalThis as { Netlify?: { context?: WithWaitUntil } }).Netlify?.context;
  } catch {
    return undefined;
  }
}
