import type { AttributeValue } from "@aws-sdk/client-dynamodb";

/**
 * One key's item as the store last saw it. `version` is `undefined` for an absent item; `verified`
 * says it was read from DynamoDB (a consistent read, or the item a failed condition returned)
 * rather than remembered from an earlier call, which another instance may have changed since.
 */
export interface Seen {
  readonly version: string | undefined;
  /** The parsed state (`undefined`: none, or a value that is not JSON). */
  readonly state: unknown;
  readonly verified: boolean;
}

/** An item the store has not seen: assumed absent, to be proven by the write's condition. */
export const ASSUMED_ABSENT: Seen = Object.freeze({ version: undefined, state: undefined, verified: false });

/** The attribute names of one table. */
export interface Attributes {
  readonly key: string;
  readonly ttl: string;
}

/** The item's own attributes beside the key and the TTL. */
export const VERSION = "v";
export const STATE = "s";

/** An item DynamoDB returned as what the store saw; one it did not write reads as no state. */
export function seenOf(item: Record<string, AttributeValue> | undefined): Seen {
  if (item === undefined) return { version: undefined, state: undefined, verified: true };
  const version = item[VERSION]?.S;
  const text = item[STATE]?.S;
  // An item without our version (another program's) is overwritten only under a condition on that absence.
  return { version: version ?? "", state: text === undefined ? undefined : parseJson(text), verified: true };
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * The states an instance remembers, by item key, least recently used first out. A remembered
 * state saves the read before a write; a stale one costs a failed condition, never a wrong decision.
 */
export class SeenCache {
  readonly #entries = new Map<string, Seen>();
  readonly #size: number;

  constructor(size: number) {
    this.#size = size;
  }

  get(key: string): Seen | undefined {
    const seen = this.#entries.get(key);
    if (seen === undefined) return undefined;
    this.#entries.delete(key);
    this.#entries.set(key, seen);
    return seen;
  }

  /** Remembers `seen` as unverified: another instance may change the item from now on. */
  set(key: string, seen: Seen): void {
    if (this.#size === 0) return;
    this.#entries.delete(key);
    this.#entries.set(key, seen.verified ? { ...seen, verified: false } : seen);
    if (this.#entries.size > this.#size) this.#entries.delete(this.#entries.keys().next().value!);
  }

  delete(key: string): void {
    this.#entries.delete(key);
  }
}

/** DynamoDB's longest partition key, in UTF-8 bytes. */
const MAX_KEY_BYTES = 2048;
/** A backslash, or a UTF-16 surrogate without its other half (UTF-8 has no spelling for it). */
const UNSPELLABLE = /\\|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/**
 * The item key of `key` in the namespace `prefix`: `prefix{key}`, with backslashes doubled and
 * lone surrogates spelled `\uXXXX` (DynamoDB stores UTF-8, which would turn them all into U+FFFD
 * and so into one key); one longer than DynamoDB allows becomes `prefix#` and the SHA-256 of
 * that spelling. Both forms are one-to-one, and never equal (only the first has a `{`).
 */
export function itemKey(prefix: string, key: string, sha256: (text: string) => string): string {
  const spelled = `${prefix}{${key.replace(UNSPELLABLE, (c) => c === "\\" ? "\\\\" : `\\u${c.charCodeAt(0).toString(16)}`)}}`;
  return utf8Length(spelled) <= MAX_KEY_BYTES ? spelled : `${prefix}#${sha256(spelled)}`;
}

function utf8Length(text: string): number {
  let bytes = text.length;
  if (bytes * 3 <= MAX_KEY_BYTES) return bytes;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0x800) bytes += c >= 0xd800 && c <= 0xdfff ? 1 : 2;
    else if (c >= 0x80) bytes += 1;
  }
  return bytes;
}
