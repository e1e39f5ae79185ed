/**
 * Opt-in typing of `req.rateLimit` on every Express request: `import "@floodgate/express/augment"`
 * once (in the app's entry, or a `.d.ts` it includes) augments `Express.Request`, so handlers
 * after the middleware read the decision without a cast. Not imported by the package itself, and
 * not published to JSR, which accepts no global augmentation: there, use `RateLimitedRequest`.
 *
 * @module @floodgate/express/augment
 */
import type { RateLimitInfo } from "@floodgate/core/http";

declare global {
  /** Express's global namespace, which its request type is declared in. */
  namespace Express {
    /** Every Express request: `req.rateLimit` is typed after this import. */
    interface Request {
      /** Floodgate's decision for this request; absent when it was skipped or allow-listed. */
      rateLimit?: RateLimitInfo;
    }
  }
}

export {};
