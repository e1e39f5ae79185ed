/*
 * The request as Floodgate sees it, whatever the framework: plain types, importing nothing.
 */

/** The request as Floodgate's callbacks see it, whatever the framework. */
export interface RateLimitRequest<Raw = unknown> {
  /** Upper-case method. */
  readonly method: string;
  /** The full path (not mount-relative), without the query string or fragment. */
  readonly path: string;
  /** The client address after trusted-proxy resolution, canonical; `undefined` when unknown. */
  readonly ip: string | undefined;
  /** A request header by lower-case name; repeated headers joined with `", "`. */
  header(name: string): string | undefined;
  /** The framework's own request object (Hono `Context`, Express `req`, Koa `ctx`, fetch `Request`). */
  readonly raw: Raw;
}

/** How an adapter reads its framework's request: given once, at construction. */
export interface RequestAccess<Raw> {
  /** The request's method, as the framework gives it (`"GET"`, `"POST"`...). */
  method(raw: Raw): string;
  /**
   * The full path (not mount-relative) as the framework routes it, without the query string or
   * fragment. From a raw request-target (Node's `req.url`), use `targetPath`.
   */
  path(raw: Raw): string;
  /** The value of the header `name` (asked for in lower case), or `undefined` when it is absent. */
  header(raw: Raw, name: string): string | undefined;
  /**
   * Whether the framework routes this request's path case-sensitively (`true`), case-insensitively
   * (`false`), or unknown (`undefined`, also when absent). Rules follow it when `caseSensitive` is
   * not set; `caseSensitive: true` over case-insensitive routing is rejected.
   */
  caseSensitiveRouting?(raw: Raw): boolean | undefined;
}
