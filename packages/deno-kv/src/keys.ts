import type { KvKey, KvKeyPart } from "./kv.ts";

/*
 * Deno KV keeps string key parts as UTF-8, which turns a lone surrogate into U+FFFD: two
 * identifiers would then share one key. An identifier that is not well-formed UTF-16 is kept
 * as its code units in a byte array instead, a part of another type, so it collides with no string.
 */

// A high surrogate not followed by a low one, or a low one not preceded by a high one.
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function part(text: string): KvKeyPart {
  if (!LONE_SURROGATE.test(text)) return text;
  const units = new Uint8Array(text.length * 2);
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    units[2 * i] = unit >> 8;
    units[2 * i + 1] = unit & 0xff;
  }
  return units;
}

/** The Deno KV key of `key` in the limiter namespace `prefix`, under the store's `root` parts. */
export function kvKeyOf(root: KvKey, prefix: string, key: string): KvKey {
  return [...root, part(prefix), part(key)];
}
