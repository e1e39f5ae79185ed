/** A character keyOf escapes: `%`, `}`, NUL (PostgreSQL text cannot hold it) or a surrogate (only lone ones). */
const NEEDS_ESCAPE = /[%}\0\uD800-\uDFFF]/;
/** A surrogate pair (kept) or a lone surrogate (escaped: UTF-8 would turn every one into U+FFFD). */
const SURROGATES = /[\uD800-\uDBFF][\uDC00-\uDFFF]|[\uD800-\uDFFF]/g;
const escapeLone = (s: string): string => (s.length === 2 ? s : `%u${s.charCodeAt(0).toString(16).toUpperCase()}`);

/**
 * The row key of an identifier under a limiter's prefix: `prefix{identifier}`, as the Redis
 * stores name their keys, with `%` and `}` escaped so the identifier always ends at the last
 * `}` (no identifier can spell another's key, under any prefix: prefixes contain no `{` or `}`),
 * NUL written `%00` and a lone surrogate `%uD800`.
 */
export function keyOf(prefix: string, identifier: string): string {
  const escaped = NEEDS_ESCAPE.test(identifier)
    ? identifier.replace(/%/g, "%25").replace(/\}/g, "%7D").replace(/\0/g, "%00").replace(SURROGATES, escapeLone)
    : identifier;
  return `${prefix}{${escaped}}`;
}
