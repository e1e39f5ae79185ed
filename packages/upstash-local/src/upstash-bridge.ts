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
import { RespError } from "./resp.ts";
import type { BridgeCounters, UpstashBridge, UpstashBridgeOptions } from "./bridge-types.ts";
import {
  type Command,
  commandName,
  encodeResult,
  entry,
  HttpError,
  normalizePrefix,
  NOT_IN_TRANSACTION,
  ROUTES,
  runOrFail,
  STATEFUL,
  toCommand,
  toCommandList,
  transactionOutcome,
} from "./bridge-commands.ts";
import { RedisPool } from "./redis-pool.ts";

export type { BridgeCounters, BridgeRequest, PoolStats, RedisEndpoint, UpstashBridge, UpstashBridgeOptions } from "./bridge-types.ts";

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
