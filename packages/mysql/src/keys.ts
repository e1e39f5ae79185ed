import { FloodgateError } from "@floodgate/core/store";

/** A character `baseKey` escapes: `%`, `}` or a surrogate (only lone ones are escaped). */
const NEEDS_ESCAPE = /[%}\uD800-\uDFFF]/;
/** A surrogate pair (kept) or a lone surrogate (escaped: UTF-8 turns every one into U+FFFD). */
const SURROGATES = /[\uD800-\uDBFF][\uDC00-\uDFFF]|[\uD800-\uDFFF]/g;
const escapeLone = (s: string): string => (s.length === 2 ? s : `%u${s.charCodeAt(0).toString(16).toUpperCase()}`);

/** Most bytes of a base key (`prefix{identifier}`): the row keys add a suffix within the column's 3072. */
export const MAX_KEY_BYTES = 3000;

const encoder = new TextEncoder();

/**
 * `prefix{identifier}`, written as the Redis stores write their keys: `%` and `}` escaped so that
 * no identifier can spell another's rows, a lone surrogate as `%uD800` (the driver sends UTF-8,
 * which would turn every one into U+FFFD). The rows of further policies append `:1`, `:2`...
 */
export function baseKey(prefix: string, key: string): string {
  const escaped = NEEDS_ESCAPE.test(key) ? key.replace(/%/g, "%25").replace(/\}/g, "%7D").replace(SURROGATES, escapeLone) : key;
  const base = `${prefix}{${escaped}}`;
  if (base.length * 3 > MAX_KEY_BYTES && encoder.encode(base).length > MAX_KEY_BYTES) {
    throw new FloodgateError(
      "INVALID_ARGUMENT",
      `mysql store: the key "${base.slice(0, 40)}..." is ${
        encoder.encode(base).length
      } bytes in UTF-8 with its prefix; expected at most ${MAX_KEY_BYTES} (hash long identifiers before limiting on them).`,
    );
  }
  return base;
}

/** The row keys of a key's policies: the base key, then `:1`, `:2`... */
export function policyKeys(base: string, count: number): string[] {
  const keys = [base];
  for (let p = 1; p < count; p++) keys.push(`${base}:${p}`);
  return keys;
}

const ID = /^[A-Za-z0-9_-]{1,64}$/;

/** Checks a reservation's or a lease's id: it is written into row keys and a comma-separated list. */
export function checkId(id: unknown, what: string): string {
  if (typeof id !== "string" || !ID.test(id)) {
    throw new FloodgateError("INVALID_ARGUMENT", `mysql store: ${what} id must be 1 to 64 characters from A-Z a-z 0-9 _ -.`);
  }
  return id;
}
