/** A character `baseKey` escapes: `%`, `}` or a surrogate (only lone ones are escaped). */
const NEEDS_ESCAPE = /[%}\uD800-\uDFFF]/;
/** A surrogate pair (kept) or a lone surrogate (escaped: UTF-8 encodes every one as U+FFFD). No lookbehind: older Safari lacks it. */
const SURROGATES = /[\uD800-\uDBFF][\uDC00-\uDFFF]|[\uD800-\uDFFF]/g;
const escapeLone = (s: string): string => (s.length === 2 ? s : `%u${s.charCodeAt(0).toString(16).toUpperCase()}`);

/**
 * `prefix{identifier}` with `%` and `}` escaped, so the hash tag always ends where the
 * identifier does: no identifier can spell another's keys, and all keys of one identifier share
 * one Redis Cluster slot. (The limiter's prefix never contains `{` or `}`.) A lone surrogate is
 * written `%uD800`: clients send keys as UTF-8, which would turn every one into U+FFFD. The first
 * policy's key is exactly that; further policies append `:1`, `:2`, ... (the short key keeps an
 * identifier's one integer within rate-limiter-flexible's `rlflx:<id>` footprint).
 */
export function baseKey(prefix: string, key: string): string {
  const escaped = needsEscape(key) ? key.replace(/%/g, "%25").replace(/\}/g, "%7D").replace(SURROGATES, escapeLone) : key;
  return `${prefix}{${escaped}}`;
}

/** {@link NEEDS_ESCAPE}'s test; a short key (most are) checked by its character codes, cheaper than entering the regex engine. */
function needsEscape(key: string): boolean {
  if (key.length > 48) return NEEDS_ESCAPE.test(key);
  for (let i = 0; i < key.length; i++) {
    const c = key.charCodeAt(i);
    if (c === 37 || c === 125 || (c & 0xf800) === 0xd800) return true;
  }
  return false;
}

/** The keys of a set's `count` policies for one identifier: `base`, `base:1`, `base:2`, ... */
export function keysOf(base: string, count: number): string[] {
  if (count === 1) return [base];
  const keys = new Array<string>(count);
  keys[0] = base;
  for (let p = 1; p < count; p++) keys[p] = `${base}:${p}`;
  return keys;
}
