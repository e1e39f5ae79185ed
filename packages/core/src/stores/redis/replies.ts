import { describeValue, FloodgateError } from "../../errors.ts";

/**
 * The script's reply as the limiter reads it: exactly `length` numbers. Anything else (numbers
 * as strings from ioredis' `stringNumbers` or a proxy, a truncated array) would be read as a
 * denial or as missing figures, so it is a STORE_ERROR instead.
 */
export function isResult(reply: unknown, length: number): reply is number[] {
  if (!Array.isArray(reply) || reply.length !== length) return false;
  for (let i = 0; i < length; i++) if (typeof reply[i] !== "number") return false;
  return true;
}

/** The STORE_ERROR for a reply that {@link isResult} refused. */
export function unexpectedReply(name: string, op: string, reply: unknown, expected: string): FloodgateError {
  return new FloodgateError(
    "STORE_ERROR",
    `${name} store: ${op} got an unexpected reply from Redis (${describeValue(reply)}); expected ${expected}.`,
  );
}

/**
 * Whether the server answered NOSCRIPT: the error code starts the message (ioredis, node-redis,
 * @upstash/redis' HTTP 400 `NOSCRIPT ..., command was: [...]`), after `Command failed: ` with
 * @upstash/redis' auto-pipelining. Anywhere else it may come from an identifier echoed in the
 * request body (@upstash/redis quotes it in every non-2xx error): that failure may have come
 * after the script ran, and an EVAL would charge again.
 */
export function isNoScript(error: unknown): boolean {
  const message = error instanceof Error ? error.message : typeof error === "string" ? error : "";
  return message.startsWith("NOSCRIPT") || message.startsWith("Command failed: NOSCRIPT");
}

/** The STORE_TIMEOUT of a call whose caller gave up before its script was loaded. */
export function abandoned(name: string, op: string): FloodgateError {
  return new FloodgateError("STORE_TIMEOUT", `${name} store: ${op} was abandoned before the script was loaded; it was not sent again.`);
}

/** A client's failure as a STORE_ERROR naming the store and the operation (a FloodgateError as it is). */
export function storeError(name: string, what: string, error: unknown): FloodgateError {
  if (error instanceof FloodgateError) return error;
  // Not String(): it throws for an object without a prototype.
  const message = error instanceof Error ? error.message : describeValue(error);
  return new FloodgateError("STORE_ERROR", `${name} store: ${what} failed: ${message}`, { cause: error });
}
