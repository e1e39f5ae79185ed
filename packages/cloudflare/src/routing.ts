/*
 * Which object holds a key. By default one object per key: a key's calls are decided one after
 * the other in its object whatever the layout, so a key never gets more than one object's
 * throughput, and one object per key gives each key all of it, with no key waiting behind
 * another. With `shards`, keys are spread over that many objects by a hash of limiter prefix and
 * key: fewer objects for apps with very many quiet keys, all of them sharing N objects' throughput.
 */

/** The object name of `key` in the limiter namespace `prefix`: per key, or its shard among `shards`. */
export function objectName(
  prefix: string,
  key: string,
  shards: number | undefined,
): string {
  // JSON keeps lone surrogates apart (as \ud800): names travel as UTF-8, which would merge them.
  const name = JSON.stringify([prefix, key]);
  return shards === undefined ? name : `floodgate-shard:${fnv1a(name) % shards}`;
}

/** FNV-1a over UTF-16 code units, 32 bits: spreads names evenly, stable across runtimes and versions. */
function fnv1a(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}
