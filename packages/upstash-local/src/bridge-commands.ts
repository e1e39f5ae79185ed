/**
 * The translation between the Upstash REST protocol's JSON and Redis commands (RESP): arguments,
 * what is refused, which commands leave a connection unusable, replies and transactions.
 */
import { RespError, type RespValue } from "./resp.ts";

/** Commands the bridge refuses: they would leave the connection in a mode plain requests can't use. */
export const REFUSED = new Set([
  "subscribe",
  "psubscribe",
  "ssubscribe",
  "unsubscribe",
  "punsubscribe",
  "sunsubscribe",
  "monitor",
  "hello",
  "sync",
  "psync",
  "replconf",
]);
/** After any of these the connection's state is no longer the pool's default: never reuse it. */
export const STATEFUL = new Set([
  "select",
  "multi",
  "exec",
  "discard",
  "watch",
  "unwatch",
  "client",
  "auth",
  "reset",
  "quit",
  "readonly",
  "readwrite",
  "asking",
  "debug",
  "swapdb",
]);
/** Transaction control inside /multi-exec would break the bridge's own MULTI ... EXEC. */
export const NOT_IN_TRANSACTION = new Set(["multi", "exec", "discard", "watch", "unwatch"]);

export const ROUTES = new Set(["/", "/pipeline", "/multi-exec"]);

export class HttpError extends Error {
  constructor(readonly status: number, message: string) {
    super(message);
  }
}

export type Command = Buffer[];

/** JSON argument → bulk string, as the protocol says: UTF-8 string, String(number), "true"/"false". */
export function toArgument(value: unknown, where: string): Buffer {
  switch (typeof value) {
    case "string":
      return Buffer.from(value, "utf8");
    case "number":
      return Buffer.from(String(value));
    case "boolean":
      return Buffer.from(value ? "true" : "false");
    default:
      throw new HttpError(
        400,
        `ERR invalid argument at ${where}: expected a string, number or boolean, got ${
          value === null ? "null" : Array.isArray(value) ? "an array" : typeof value
        }`,
      );
  }
}

export function toCommand(value: unknown, where: string): Command {
  if (!Array.isArray(value) || value.length === 0) {
    throw new HttpError(400, `ERR ${where} must be a non-empty array of arguments`);
  }
  const command = value.map((arg, i) => toArgument(arg, `${where}[${i}]`));
  const name = commandName(command);
  if (REFUSED.has(name) || (name === "client" && command[1]?.toString().toLowerCase() === "reply")) {
    throw new HttpError(400, `ERR command '${name}' is not supported by the local Upstash bridge`);
  }
  return command;
}

export function toCommandList(value: unknown): Command[] {
  if (!Array.isArray(value) || value.length === 0) {
    throw new HttpError(400, "ERR body must be a non-empty array of commands");
  }
  return value.map((entry, i) => toCommand(entry, `command ${i}`));
}

export function commandName(command: Command): string {
  return (command[0] ?? Buffer.alloc(0)).toString("utf8").toLowerCase();
}

/**
 * Redis reply → JSON result. With base64, every string at every depth is encoded from its raw
 * bytes; only a top-level "OK" stays raw, as the client expects. Integers stay numbers, nil null.
 */
export function encodeResult(value: RespValue, base64: boolean, topLevel: boolean): unknown {
  if (value === null || typeof value === "number") return value;
  if (Buffer.isBuffer(value)) {
    if (!base64) return value.toString("utf8");
    if (topLevel && value.length === 2 && value[0] === 0x4f && value[1] === 0x4b) return "OK";
    return value.toString("base64");
  }
  // An error nested inside an array (a Lua table holding a pcall error) has no JSON slot of
  // its own: it travels as its text.
  if (value instanceof RespError) return encodeResult(Buffer.from(value.message, "utf8"), base64, false);
  return value.map((item) => encodeResult(item, base64, false));
}

export function entry(value: RespValue, base64: boolean): { result: unknown } | { error: string } {
  return value instanceof RespError ? { error: value.message } : { result: encodeResult(value, base64, true) };
}

export function normalizePrefix(prefix: string | undefined): string {
  if (prefix === undefined || prefix === "" || prefix === "/") return "";
  const withSlash = prefix.startsWith("/") ? prefix : `/${prefix}`;
  return withSlash.replace(/\/+$/, "");
}

/** A lost Redis connection mid-request becomes a 502 JSON answer, never a hang or an HTML page. */
export async function runOrFail<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    throw new HttpError(502, `bridge: redis connection lost: ${(error as Error).message}`);
  }
}

/**
 * Replies to MULTI, each command, EXEC → one entry per command, or the reason the transaction
 * was discarded (EXECABORT: a command was rejected at queue time).
 */
export function transactionOutcome(replies: RespValue[], count: number): { abort?: string; entries: RespValue[] } {
  const multi = replies[0];
  if (multi instanceof RespError) return { abort: multi.message, entries: [] };
  const queued = replies.slice(1, 1 + count);
  const exec = replies[1 + count];
  if (exec instanceof RespError) return { abort: exec.message, entries: [] };
  if (!Array.isArray(exec)) return { abort: "EXECABORT Transaction aborted", entries: [] };
  // Commands Redis refused without queueing have no slot in EXEC's array: keep them aligned.
  const entries: RespValue[] = [];
  let next = 0;
  for (const reply of queued) {
    entries.push(reply instanceof RespError ? reply : (exec[next++] ?? null));
  }
  return { entries };
}
