import { FloodgateError } from "../errors.ts";
import { sha256Hex, utf16Bytes } from "../sha256.ts";
import { isThenable } from "../stores/store.ts";
import { type MaybePromise, type RateLimitRequest, WHERE } from "./options.ts";
import { errorText } from "./store-errors.ts";

// What the user's functions give a request: its key (long keys shortened to a fixed length) and
// any value whose function threw, as an error naming the option.

/**
 * Calls a user function given as option `option` (`policy`, `key`, `cost`): one that throws or
 * rejects fails the request with an INVALID_ARGUMENT error naming the option (the cause kept).
 */
export function called<R, T>(option: string, fn: (req: RateLimitRequest<R>) => MaybePromise<T>, req: RateLimitRequest<R>): MaybePromise<T> {
  const failed = (error: unknown): FloodgateError =>
    new FloodgateError(
      "INVALID_ARGUMENT",
      `${WHERE}: the \`${option}\` function threw: ${errorText(error)}. The request was not counted.`,
      { cause: error },
    );
  let returned: MaybePromise<T>;
  try {
    returned = fn(req);
  } catch (error) {
    throw failed(error);
  }
  return isThenable(returned) ? returned.then(undefined, (error: unknown) => Promise.reject(failed(error))) : returned;
}

/** Longest key a key function may return that is counted as it is. */
const MAX_PLAIN_KEY = 1000;
/** What a longer key keeps of its own text before its digest: 959 + "#" + 64 hex digits = 1024, the limiter's maximum. */
const LONG_KEY_HEAD = 959;

/**
 * Keys longer than {@link MAX_PLAIN_KEY} become their head, `#` and the SHA-256 of the whole (its
 * UTF-16 code units): 1,024 characters, a length no key counted as it is can have, so no short key
 * spells a shortened one, and two long keys share a counter only if SHA-256 collides. What a key
 * function returns unchecked (`null`, a number) goes on as is: the limiter rejects it
 * (INVALID_ARGUMENT naming the key), not a TypeError here.
 */
export function fitKey(key: string): string {
  if (typeof key !== "string" || key.length <= MAX_PLAIN_KEY) return key;
  return `${key.slice(0, LONG_KEY_HEAD)}#${sha256Hex(utf16Bytes(key))}`;
}
