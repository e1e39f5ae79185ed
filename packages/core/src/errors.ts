/** Stable machine-readable codes carried by every {@link FloodgateError}. */
export type FloodgateErrorCode =
  | "INVALID_OPTION"
  | "INVALID_ARGUMENT"
  | "STORE_ERROR"
  | "STORE_TIMEOUT"
  | "STORE_UNAVAILABLE"
  | "LEASE_UNSUITABLE";

/**
 * The one error class Floodgate throws. `code` is stable across versions; the message names
 * what was wrong and what is accepted.
 */
export class FloodgateError extends Error {
  /** What went wrong, as a stable code to branch on (the message is for people and may change). */
  declare readonly code: FloodgateErrorCode;

  /**
   * Creates an error with its stable `code` and a message in full sentences; `options.cause` keeps
   * the underlying error (a store's, for example).
   */
  constructor(code: FloodgateErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "FloodgateError";
    this.code = code;
  }
}

/** Renders a received value for an error message without dumping huge objects. */
export function describeValue(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value.length > 60 ? `${value.slice(0, 57)}...` : value);
  if (typeof value === "number" || typeof value === "boolean" || typeof value === "bigint") return String(value);
  if (value === undefined) return "undefined";
  if (value === null) return "null";
  if (typeof value === "function") return "a function";
  if (Array.isArray(value)) {
    // A hole (`[a, , b]`) is what a stray comma leaves: say where it is.
    for (let i = 0; i < value.length; i++) if (!(i in value)) return `an array of ${value.length} with an empty slot at index ${i}`;
    return `an array of ${value.length}`;
  }
  return "an object";
}
