import { RESOLVED } from "../resolved.ts";
import type { Warnings } from "./warnings.ts";

// The `limiterPerRequest` warning: a middleware created inside a handler, once per request,
// counts from zero each time and limits nothing. Such a middleware decides its first request in
// the same turn of the event loop it was created in (`rateLimit(options)(req, res, next)`); one
// created at an app's start, however many apps a script or a test suite builds one after
// another, decides its first request later, when one arrives.

/** Middlewares that decided their first request in the turn they were created in, so far. */
let createdPerRequest = 0;
/** After this many such middlewares the warning is emitted: one or a few are a lazily created app (`limiter ??= rateLimit(...)`). */
const PER_REQUEST_THRESHOLD = 20;

/**
 * Called when a middleware is created; returns what its first decision calls, which counts the
 * middleware as created per request when it is still the turn of its creation.
 */
export function watchCreation(warnings: Warnings): () => void {
  let sameTurn = true;
  // A promise reaction, not queueMicrotask: a middleware created at a Worker's global scope must
  // call none of the scheduling functions there (test/runtimes/workerd.test.ts guards them).
  RESOLVED.then(() => {
    sameTurn = false;
  });
  return () => {
    if (sameTurn && ++createdPerRequest === PER_REQUEST_THRESHOLD) warnings.emit("limiterPerRequest");
  };
}
