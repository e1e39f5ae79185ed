/**
 * A local Upstash-compatible REST server: a node:http server that speaks the protocol
 * `@upstash/redis` 1.39 speaks (the README lists what of it is covered) and runs every command
 * on a real redis-server over RESP2. It lets the real Upstash client run against real Redis,
 * and counts the HTTP requests it serves so tests can assert round trips.
 *
 * Each HTTP request borrows its own Redis connection for its whole duration. A connection whose
 * state may have changed (SELECT, MULTI, WATCH, CLIENT ..., an error reply, an aborted request)
 * is destroyed instead of going back to the pool.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { randomBytes } from "node:crypto";
import { connectResp, type RespClient, RespError, type RespTarget, type RespValue } from "./resp.ts";

export type RedisEndpoint = ({ host: string; port: number } | { socket: string }) & {
  /** Sent with AUTH on every new connection. */
  password?: string;
  username?: string;
  /** Sent with SELECT on every new connection. */
  db?: number;
};

export interface UpstashBridgeOptions {
  /** The redis-server to run commands on. */
  redis: RedisEndpoint;
  /** Bearer token clients must send. Default: random. */
  token?: string;
  /** HTTP port on `host`. Default 0: a free one. */
  port?: number;
  /** Interface to listen on. Default 127.0.0.1. */
  host?: string;
  /** Serve under this path (`/x` → `/x`, `/x/pipeline`, `/x/multi-exec`). Default none. */
  pathPrefix?: string;
  /** Idle Redis connections kept for reuse. Default 16. */
  maxIdleConnections?: number;
  /** Largest accepted request body. Default 64 MiB. */
  maxBodyBytes?: number;
  /**
   * Answer cross-origin requests from this one origin (e.g. "http://127.0.0.1:8080"), for a
   * client running in a browser page: CORS preflights (OPTIONS) from it get a 204 allowing POST
   * with the headers asked for, and its requests get `access-control-allow-origin`. Preflights
   * are answered before authentication and are not counted in `requests`. Default: no CORS at
   * all (other origins, and every origin when unset, get no CORS header).
   */
  corsOrigin?: string;
  /** Called for every request whose body parsed, before it runs: to assert headers or bodies. */
  onRequest?: (request: BridgeRequest) => void;
}

export interface BridgeRequest {
  /** "/", "/pipeline" or "/multi-exec" (relative to the prefix). */
  path: string;
  headers: http.IncomingHttpHeaders;
  body: unknown;
}

export interface BridgeCounters {
  /** Every HTTP request received, whatever its outcome. */
  total: number;
  /**
   * Per path relative to the prefix ("/", "/pipeline", "/multi-exec", or an unknown one such as
   * "/nope"); a path outside the prefix counts as `outside:<path>`.
   */
  byPath: Record<string, number>;
}

export interface PoolStats {
  /** Redis connections opened so far. */
  created: number;
  /** Requests served by an idle connection taken from the pool. */
  reused: number;
  /** Connections destroyed instead of returned to the pool. */
  discarded: number;
  /** Connections idle in the pool now. */
  readonly idle: number;
}

export interface UpstashBridge {
  /** Base URL for the client, prefix included, no trailing slash. */
  url: string;
  token: string;
  port: number;
  requests: BridgeCounters;
  /** TCP connections accepted from HTTP clients: stays low when keep-alive works. */
  readonly httpConnections: number;
  /** The `upstash-sync-token` header value of the latest response (a counter). */
  readonly lastSyncToken: string;
  pool: PoolStats;
  resetCounters(): void;
  stop(): Promise<void>;
}

/** Commands the bridge refuses: they would leave the connection in a mode plain requests can't use. */
const REFUSED = new Set([
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
const STATEFUL = new Set([
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
const NOT_IN_TRANSACTION = new Set(["multi", "exec", "discard", "watch", "unwatch"]);

const ROUTES = new Set(["/", "/pipeline", "/multi-exec"]);

class HttpError extends Error {
  constructor(readonly status: number, message: string) {
    super(message);
  }
}

type Command = Buffer[];

/** JSON argument → bulk string, as the protocol says: UTF-8 string, String(number), "true"/"false". */
function toArgument(value: unknown, where: string): Buffer {
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

function toCommand(value: unknown, where: string): Command {
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

function toCommandList(value: unknown): Command[] {
  if (!Array.isArray(value) || value.length === 0) {
    throw new HttpError(400, "ERR body must be a non-empty array of commands");
  }
  return value.map((entry, i) => toCommand(entry, `command ${i}`));
}

function commandName(command: Command): string {
  return (command[0] ?? Buffer.alloc(0)).toString("utf8").toLowerCase();
}

/**
 * Redis reply → JSON result. With base64, every string at every depth is encoded from its raw
 * bytes; only a top-level "OK" stays raw, as the client expects. Integers stay numbers, nil null.
 */
function encodeResult(value: RespValue, base64: boolean, topLevel: boolean): unknown {
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

function entry(value: RespValue, base64: boolean): { result: unknown } | { error: string } {
  return value instanceof RespError ? { error: value.message } : { result: encodeResult(value, base64, true) };
}

function normalizePrefix(prefix: string | undefined): string {
  if (prefix === undefined || prefix === "" || prefix === "/") return "";
  const withSlash = prefix.startsWith("/") ? prefix : `/${prefix}`;
  return withSlash.replace(/\/+$/, "");
}

class RedisPool {
  private readonly idleConnections: RespClient[] = [];
  private readonly all = new Set<RespClient>();
  private closing = false;
  readonly stats: PoolStats;

  constructor(
    private readonly endpoint: RedisEndpoint,
    private readonly maxIdle: number,
  ) {
    const idle = this.idleConnections;
    this.stats = {
      created: 0,
      reused: 0,
      discarded: 0,
      get idle() {
        return idle.length;
      },
    };
  }

  async acquire(): Promise<RespClient> {
    if (this.closing) throw new HttpError(503, "bridge is stopping");
    for (let conn = this.idleConnections.pop(); conn !== undefined; conn = this.idleConnections.pop()) {
      if (!conn.isClosed) {
        this.stats.reused++;
        return conn;
      }
    }
    const target: RespTarget = "socket" in this.endpoint
      ? { path: this.endpoint.socket }
      : { host: this.endpoint.host, port: this.endpoint.port };
    let conn: RespClient;
    try {
      conn = await connectResp(target, { connectTimeoutMs: 2000 });
    } catch (error) {
      throw new HttpError(503, `bridge: redis unreachable: ${(error as Error).message}`);
    }
    this.stats.created++;
    this.all.add(conn);
    void conn.closed.then(() => {
      this.all.delete(conn);
      const at = this.idleConnections.indexOf(conn);
      if (at !== -1) this.idleConnections.splice(at, 1);
    });
    const setup: Command[] = [];
    if (this.endpoint.password !== undefined) {
      setup.push(
        this.endpoint.username !== undefined
          ? [Buffer.from("AUTH"), Buffer.from(this.endpoint.username), Buffer.from(this.endpoint.password)]
          : [Buffer.from("AUTH"), Buffer.from(this.endpoint.password)],
      );
    }
    if (this.endpoint.db !== undefined && this.endpoint.db !== 0) {
      setup.push([Buffer.from("SELECT"), Buffer.from(String(this.endpoint.db))]);
    }
    if (setup.length > 0) {
      const replies = await conn.pipeline(setup).catch((error: Error) => [new RespError(error.message)]);
      const failed = replies.find((r) => r instanceof RespError);
      if (failed instanceof RespError) {
        conn.destroy();
        throw new HttpError(503, `bridge: redis connection setup failed: ${failed.message}`);
      }
    }
    return conn;
  }

  release(conn: RespClient, reusable: boolean): void {
    if (reusable && !this.closing && !conn.isClosed && this.idleConnections.length < this.maxIdle) {
      this.idleConnections.push(conn);
      return;
    }
    this.stats.discarded++;
    conn.destroy();
  }

  close(): void {
    this.closing = true;
    this.idleConnections.length = 0;
    for (const conn of this.all) conn.destroy();
  }
}

async function readBody(req: http.IncomingMessage, limit: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) throw new HttpError(413, `ERR request body larger than ${limit} bytes`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

/**
 * Starts the bridge in front of a redis-server.
 *
 * @example
 * const redis = await startRedis();
 * const bridge = await startUpstashBridge({ redis: { host: redis.host, port: redis.port } });
 * const client = new Redis({ url: bridge.url, token: bridge.token });
 */
export async function startUpstashBridge(options: UpstashBridgeOptions): Promise<UpstashBridge> {
  const token = options.token ?? randomBytes(18).toString("base64url");
  const prefix = normalizePrefix(options.pathPrefix);
  const maxBodyBytes = options.maxBodyBytes ?? 64 * 1024 * 1024;
  const pool = new RedisPool(options.redis, options.maxIdleConnections ?? 16);
  const requests: BridgeCounters = { total: 0, byPath: {} };
  let httpConnections = 0;
  let syncToken = 0;

  const send = (res: http.ServerResponse, status: number, body: unknown): void => {
    if (res.headersSent || res.destroyed) return;
    const payload = JSON.stringify(body);
    res.writeHead(status, {
      "content-type": "application/json",
      "content-length": Buffer.byteLength(payload),
      "upstash-sync-token": String(++syncToken),
      ...corsHeaders(res.req),
    });
    res.end(payload);
  };

  const corsOrigin = options.corsOrigin;
  const corsAllowed = (req: http.IncomingMessage): boolean => corsOrigin !== undefined && req.headers.origin === corsOrigin;
  const corsHeaders = (req: http.IncomingMessage): Record<string, string> =>
    corsAllowed(req)
      ? { "access-control-allow-origin": corsOrigin!, "access-control-expose-headers": "upstash-sync-token", vary: "origin" }
      : {};

  const routeOf = (pathname: string): string | undefined => {
    if (prefix !== "" && pathname !== prefix && !pathname.startsWith(`${prefix}/`)) return undefined;
    const rest = pathname.slice(prefix.length);
    return rest === "" ? "/" : rest;
  };

  const handle = async (req: http.IncomingMessage, res: http.ServerResponse): Promise<void> => {
    const pathname = new URL(req.url ?? "/", "http://bridge.invalid").pathname;
    const relative = routeOf(pathname);
    const counted = relative ?? `outside:${pathname}`;
    requests.total++;
    requests.byPath[counted] = (requests.byPath[counted] ?? 0) + 1;

    // The whole rest of the header is the credential: "Bearer <token> extra" is a wrong token.
    const authorization = req.headers.authorization ?? "";
    const space = authorization.indexOf(" ");
    const scheme = space === -1 ? authorization : authorization.slice(0, space);
    const credential = space === -1 ? undefined : authorization.slice(space + 1);
    if (scheme.toLowerCase() !== "bearer" || credential !== token) {
      req.resume();
      throw new HttpError(401, "Unauthorized");
    }
    if (relative === undefined || !ROUTES.has(relative)) {
      req.resume();
      throw new HttpError(404, `ERR unknown path ${pathname}`);
    }
    if (req.method !== "POST") {
      req.resume();
      throw new HttpError(405, `ERR method ${req.method ?? "?"} not allowed, use POST`);
    }
    const raw = await readBody(req, maxBodyBytes);
    let body: unknown;
    try {
      body = JSON.parse(raw.toString("utf8"));
    } catch (error) {
      throw new HttpError(400, `ERR failed to parse JSON body: ${(error as Error).message}`);
    }
    const base64 = String(req.headers["upstash-encoding"] ?? "").toLowerCase() === "base64";
    const commands = relative === "/" ? [toCommand(body, "body")] : toCommandList(body);
    if (relative === "/multi-exec") {
      const bad = commands.find((c) => NOT_IN_TRANSACTION.has(commandName(c)));
      if (bad !== undefined) throw new HttpError(400, `ERR '${commandName(bad)}' is not allowed in /multi-exec`);
    }
    options.onRequest?.({ path: relative, headers: req.headers, body });

    const conn = await pool.acquire();
    // If the HTTP client goes away mid-command (a blocking BLPOP, an aborted fetch), the Redis
    // connection's state is unknown: destroy it rather than hand it to the next request.
    let finished = false;
    const onClose = (): void => {
      if (!finished) conn.destroy(new Error("http client went away"));
    };
    res.once("close", onClose);
    if (res.destroyed || req.socket.destroyed) {
      // Gone while we waited for a connection: run nothing.
      res.off("close", onClose);
      pool.release(conn, true);
      return;
    }
    let reusable = !commands.some((c) => STATEFUL.has(commandName(c)));
    try {
      if (relative === "/") {
        const reply = await runOrFail(() => conn.send(commands[0] as Command));
        if (reply instanceof RespError) {
          reusable = false;
          send(res, 400, { error: reply.message });
        } else {
          send(res, 200, { result: encodeResult(reply, base64, true) });
        }
      } else if (relative === "/pipeline") {
        const replies = await runOrFail(() => conn.pipeline(commands));
        if (replies.some((r) => r instanceof RespError)) reusable = false;
        send(res, 200, replies.map((r) => entry(r, base64)));
      } else {
        const replies = await runOrFail(() => conn.pipeline([[Buffer.from("MULTI")], ...commands, [Buffer.from("EXEC")]]));
        const outcome = transactionOutcome(replies, commands.length);
        if (outcome.abort !== undefined) {
          reusable = false;
          send(res, 400, { error: outcome.abort });
        } else {
          if (outcome.entries.some((r) => r instanceof RespError)) reusable = false;
          send(res, 200, outcome.entries.map((r) => entry(r, base64)));
        }
      }
    } catch (error) {
      reusable = false;
      throw error;
    } finally {
      finished = true;
      res.off("close", onClose);
      pool.release(conn, reusable);
    }
  };

  const server = http.createServer((req, res) => {
    if (req.method === "OPTIONS" && corsAllowed(req) && req.headers["access-control-request-method"] !== undefined) {
      req.resume();
      res.writeHead(204, {
        "access-control-allow-origin": corsOrigin!,
        "access-control-allow-methods": "POST",
        "access-control-allow-headers": req.headers["access-control-request-headers"] ?? "",
        "access-control-max-age": "600",
        vary: "origin, access-control-request-headers",
      });
      res.end();
      return;
    }
    handle(req, res).catch((error: unknown) => {
      if (error instanceof HttpError) {
        send(res, error.status, { error: error.message });
      } else {
        send(res, 500, { error: `bridge: ${(error as Error).message ?? String(error)}` });
      }
    });
  });
  server.on("connection", () => {
    httpConnections++;
  });
  server.on("clientError", (_error, socket) => {
    if (socket.writable) {
      const payload = JSON.stringify({ error: "ERR bad HTTP request" });
      socket.end(
        `HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: ${
          Buffer.byteLength(payload)
        }\r\nconnection: close\r\n\r\n${payload}`,
      );
    } else {
      socket.destroy();
    }
  });

  const host = options.host ?? "127.0.0.1";
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen({ host, port: options.port ?? 0 }, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const urlHost = host.includes(":") ? `[${host}]` : host;

  return {
    url: `http://${urlHost}:${port}${prefix}`,
    token,
    port,
    requests,
    get httpConnections() {
      return httpConnections;
    },
    get lastSyncToken() {
      return String(syncToken);
    },
    pool: pool.stats,
    resetCounters() {
      requests.total = 0;
      for (const key of Object.keys(requests.byPath)) delete requests.byPath[key];
    },
    async stop() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      pool.close();
      await closed;
    },
  };
}

/** A lost Redis connection mid-request becomes a 502 JSON answer, never a hang or an HTML page. */
async function runOrFail<T>(run: () => Promise<T>): Promise<T> {
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
function transactionOutcome(replies: RespValue[], count: number): { abort?: string; entries: RespValue[] } {
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
