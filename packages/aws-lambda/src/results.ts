import type { PreparedResponse } from "@floodgate/core/http";
import { type EventShape, type LambdaHttpEvent, shapeOf, usesMultiValue } from "./events.ts";

type HeaderValue = string | number | boolean;

/** A result of an HTTP event handler, any shape (payload 2.0 also accepts a bare string or object). */
export interface LambdaHttpResult {
  /** The status to send. */
  statusCode?: number;
  /** ALB's status line text, e.g. `"200 OK"`. */
  statusDescription?: string;
  /** Headers, one value each. */
  headers?: { [name: string]: HeaderValue | undefined };
  /** Headers, every value of each. */
  multiValueHeaders?: { [name: string]: HeaderValue[] | undefined };
  /** Payload 2.0: the `Set-Cookie` values. */
  cookies?: string[];
  /** The body; base64 when `isBase64Encoded`. */
  body?: string;
  /** Whether `body` is base64 (binary). */
  isBase64Encoded?: boolean;
}

const REASONS: Record<number, string> = { 403: "Forbidden", 429: "Too Many Requests", 503: "Service Unavailable" };

/** A limited (or refused) request's answer in the event's own response shape. */
export function deniedResult(event: LambdaHttpEvent, denied: PreparedResponse): LambdaHttpResult {
  const result: LambdaHttpResult = { statusCode: denied.status };
  if (shapeOf(event) === "alb") result.statusDescription = `${denied.status} ${REASONS[denied.status] ?? ""}`.trim();
  if (usesMultiValue(event)) {
    const multi: Record<string, HeaderValue[]> = {};
    forEachReplacing(denied.headers, (name, value) => multi[name] = [value]);
    result.multiValueHeaders = multi;
  } else {
    const single: Record<string, HeaderValue> = {};
    forEachReplacing(denied.headers, (name, value) => single[name] = value);
    result.headers = single;
  }
  result.body = denied.body ?? "";
  result.isBase64Encoded = false;
  return result;
}

/** Each header once, a later one replacing an earlier of the same name in any case (a custom handler's over Floodgate's). */
function forEachReplacing(headers: readonly string[], set: (name: string, value: string) => void): void {
  const last = new Map<string, number>();
  for (let i = 0; i < headers.length; i += 2) last.set(headers[i]!.toLowerCase(), i);
  for (const i of last.values()) set(headers[i]!, headers[i + 1]!);
}

/**
 * The handler's result as the front door reads it: payload 2.0 turns a bare string or an object
 * without `statusCode` into a 200 whose body it is (JSON), so the headers have somewhere to go.
 * `undefined` for a result the front door cannot read (it answers 502).
 */
export function structured(shape: EventShape, result: unknown): LambdaHttpResult | undefined {
  if (typeof result === "object" && result !== null && typeof (result as LambdaHttpResult).statusCode === "number") {
    return result as LambdaHttpResult;
  }
  if (shape !== "http" || result === undefined) return undefined;
  return {
    statusCode: 200,
    headers: { "content-type": "application/json" },
    body: typeof result === "string" ? result : JSON.stringify(result),
    isBase64Encoded: false,
  };
}

/** Whether the result sets header `name` (any case), in either map. */
function has(result: LambdaHttpResult, name: string): boolean {
  const lower = name.toLowerCase();
  for (const map of [result.headers, result.multiValueHeaders]) {
    if (map == null) continue;
    for (const key in map) if (key.toLowerCase() === lower && map[key] !== undefined) return true;
  }
  return false;
}

/**
 * A copy of `result` with the rate-limit headers it does not set itself (the handler's win): in
 * `multiValueHeaders` when the event used them (the front door then reads only those), else in `headers`.
 */
export function withHeaders(event: LambdaHttpEvent, result: LambdaHttpResult, headers: readonly string[]): LambdaHttpResult {
  const multi = usesMultiValue(event);
  const out: LambdaHttpResult = { ...result };
  if (multi) out.multiValueHeaders = { ...result.multiValueHeaders };
  else out.headers = { ...result.headers };
  for (let i = 0; i < headers.length; i += 2) {
    const name = headers[i]!;
    if (has(result, name)) continue;
    if (multi) out.multiValueHeaders![name] = [headers[i + 1]!];
    else out.headers![name] = headers[i + 1]!;
  }
  return out;
}

/** The result as a fetch-style response for a cost's `actual`: its status and headers. */
export function endedView(result: LambdaHttpResult): { status: number; headers: Headers } {
  const headers = new Headers();
  for (const [name, value] of Object.entries(result.multiValueHeaders ?? {})) for (const v of value ?? []) headers.append(name, String(v));
  for (const [name, value] of Object.entries(result.headers ?? {})) if (value !== undefined) headers.set(name, String(value));
  return { status: result.statusCode!, headers };
}
