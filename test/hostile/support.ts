// Shared by the hostile-input suites: raw HTTP/1.1 over TCP (no client library that would
// normalise or refuse what an attacker sends), the four adapters on real Node servers, the
// collectors of unhandled rejections and uncaught exceptions, and the run sizes.
import { createServer, type IncomingMessage, type Server } from "node:http";
import net, { type AddressInfo } from "node:net";
import { FloodgateError, type HttpRateLimitOptions, withRateLimit } from "@floodgate/core";
import { rateLimit as expressRateLimit, type RateLimitedRequest } from "@floodgate/express";
import { rateLimit as honoRateLimit, type RateLimitEnv } from "@floodgate/hono";
import { rateLimit as koaRateLimit } from "@floodgate/koa";
import { serve } from "@hono/node-server";
import express from "express";
import { Hono } from "hono";
import Koa from "koa";

/** `FLOODGATE_LONG=1` runs every property many more times (for a soak before a release, not CI). */
export const LONG = process.env.FLOODGATE_LONG === "1";
/** Property runs per adapter: a few seconds each on a 2-core machine by default. */
export const runs = (short: number, long = short * 20): number => (LONG ? long : short);

/** What one raw exchange came back as, after checking that it is well-formed HTTP/1.1. */
export interface RawReply {
  status: number;
  /** Lower-case names; repeated headers joined with ", ". */
  headers: Record<string, string>;
  body: string;
  /** A reply to HEAD: framed as the GET reply would be, with no body. */
  bodiless: boolean;
}

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const REQUEST_TIMEOUT_MS = 5_000;

/**
 * Sends `head` (request line and header lines, without the final blank line) as raw bytes and
 * reads until the server closes. Throws when the reply is not well-formed HTTP/1.1: a status line,
 * header lines of a token and a value, and a body that matches its framing.
 */
export function rawRequest(port: number, head: string, body = ""): Promise<RawReply> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, "127.0.0.1");
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no complete reply within ${REQUEST_TIMEOUT_MS} ms to ${JSON.stringify(head.slice(0, 200))}`));
    }, REQUEST_TIMEOUT_MS);
    socket.on("data", (chunk) => chunks.push(chunk));
    // A server may reset a connection it refused mid-request (a header too large): what it sent counts.
    socket.on("error", () => {});
    socket.on("close", () => {
      clearTimeout(timer);
      try {
        resolve(parseReply(Buffer.concat(chunks), head));
      } catch (error) {
        reject(error);
      }
    });
    socket.write(Buffer.from(`${head}\r\nConnection: close\r\n\r\n${body}`, "latin1"));
  });
}

function parseReply(bytes: Buffer, sent: string): RawReply {
  const what = `reply to ${JSON.stringify(sent.slice(0, 300))}`;
  const end = bytes.indexOf("\r\n\r\n");
  if (end === -1) throw new Error(`${what}: no header block in ${JSON.stringify(bytes.toString("latin1").slice(0, 300))}`);
  const lines = bytes.subarray(0, end).toString("latin1").split("\r\n");
  const statusLine = /^HTTP\/1\.1 (\d{3})(?: .*)?$/.exec(lines[0]!);
  if (statusLine === null) throw new Error(`${what}: bad status line ${JSON.stringify(lines[0])}`);
  const headers: Record<string, string> = {};
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(":");
    const name = line.slice(0, colon);
    const value = line.slice(colon + 1).trim();
    if (colon <= 0 || !TOKEN.test(name)) throw new Error(`${what}: bad header line ${JSON.stringify(line)}`);
    // eslint-disable-next-line no-control-regex
    if (/[\u0000-\u0008\u000a-\u001f\u007f]/.test(value)) throw new Error(`${what}: control character in header ${name}`);
    const key = name.toLowerCase();
    headers[key] = key in headers ? `${headers[key]}, ${value}` : value;
  }
  let rest = bytes.subarray(end + 4);
  let body: Buffer;
  const bodiless = sent.startsWith("HEAD ");
  if (bodiless) {
    if (rest.length !== 0) throw new Error(`${what}: a body in a reply to HEAD`);
    body = rest;
  } else if (/\bchunked\b/i.test(headers["transfer-encoding"] ?? "")) {
    const parts: Buffer[] = [];
    for (;;) {
      const lineEnd = rest.indexOf("\r\n");
      if (lineEnd === -1) throw new Error(`${what}: chunked body cut short`);
      const size = parseInt(rest.subarray(0, lineEnd).toString("latin1"), 16);
      if (!Number.isFinite(size)) throw new Error(`${what}: bad chunk size`);
      if (size === 0) break;
      parts.push(rest.subarray(lineEnd + 2, lineEnd + 2 + size));
      rest = rest.subarray(lineEnd + 2 + size + 2);
    }
    body = Buffer.concat(parts);
  } else if (headers["content-length"] !== undefined) {
    const length = Number(headers["content-length"]);
    if (!Number.isInteger(length) || length < 0) throw new Error(`${what}: bad Content-Length ${headers["content-length"]}`);
    if (rest.length !== length) throw new Error(`${what}: Content-Length ${length} but ${rest.length} body bytes`);
    body = rest;
  } else {
    body = rest;
  }
  return { status: Number(statusLine[1]), headers, body: body.toString("utf8"), bodiless };
}

/**
 * Asserts what every reply of a rate-limited route must be, whatever was sent: never a 5xx but
 * the app's own 500 for a documented programmer mistake (returned as `INVALID_ARGUMENT`), and
 * coherent rate-limit headers when the limiter decided.
 */
export function checkReply(reply: RawReply, expectedError: boolean, sent: string): void {
  const json = (): {
    code?: string;
    counted?: boolean;
    error?: { code?: string };
  } => (reply.bodiless ? { code: "INVALID_ARGUMENT", counted: false, error: { code: "RATE_LIMITED" } } : JSON.parse(reply.body));
  const what = `${reply.status} ${JSON.stringify(reply.body.slice(0, 200))} for ${JSON.stringify(sent.slice(0, 300))}`;
  if (expectedError && reply.status === 500) {
    if (json().code !== "INVALID_ARGUMENT") throw new Error(`not INVALID_ARGUMENT: ${what}`);
    return;
  }
  // A request Node's parser refuses (an unknown method, a bad header byte, a header too large)
  // never reaches the app: a 4xx from Node itself.
  if (reply.status >= 400 && reply.status < 500 && reply.status !== 429) return;
  if (expectedError) throw new Error(`expected the app's 500 INVALID_ARGUMENT, got ${what}`);
  if (reply.status !== 200 && reply.status !== 429) throw new Error(`unexpected status: ${what}`);
  const remaining = reply.headers["x-ratelimit-remaining"];
  if (reply.status === 429) {
    if (!/^\d+$/.test(reply.headers["retry-after"] ?? "")) throw new Error(`429 without a whole Retry-After: ${what}`);
    if (json().error?.code !== "RATE_LIMITED") throw new Error(`429 without its JSON body: ${what}`);
  } else if (remaining === undefined) {
    // The only way through with no headers: a cost of 0 (not counted).
    if (json().counted !== false) throw new Error(`200 without rate-limit headers: ${what}`);
    return;
  }
  if (!/^\d+$/.test(remaining ?? "")) throw new Error(`bad X-RateLimit-Remaining ${remaining}: ${what}`);
}

/** Collects what escaped: every unhandled rejection and uncaught exception while installed. */
export function escapeCollector(): { readonly escaped: unknown[]; uninstall(): void } {
  const escaped: unknown[] = [];
  const onRejection = (reason: unknown): void => {
    escaped.push(reason);
  };
  const onException = (error: unknown): void => {
    escaped.push(error);
  };
  process.on("unhandledRejection", onRejection);
  process.on("uncaughtException", onException);
  return {
    escaped,
    uninstall() {
      process.off("unhandledRejection", onRejection);
      process.off("uncaughtException", onException);
    },
  };
}

/** The route's reply: the key counted, or that the request was not counted (cost 0). */
const routeBody = (info: { key: string } | undefined): string =>
  JSON.stringify(info === undefined ? { counted: false } : { counted: true, key: info.key });

/** What an error that reached the app's error handler becomes: a 500 naming its code. */
function errorBody(error: unknown): string {
  return JSON.stringify({
    code: error instanceof FloodgateError ? error.code : "OTHER",
    message: String((error as Error)?.message ?? error),
  });
}

export interface RunningApp {
  readonly name: string;
  readonly port: number;
  /** Errors that reached the app's own error handler. */
  readonly errors: unknown[];
  close(): Promise<void>;
}

export interface Adapter {
  readonly name: string;
  start(options: HttpRateLimitOptions<any>): Promise<RunningApp>;
}

async function listening(server: Server): Promise<number> {
  if (!server.listening) await new Promise<void>((resolve) => server.once("listening", resolve));
  return (server.address() as AddressInfo).port;
}

function running(name: string, server: Server, errors: unknown[]): Promise<RunningApp> {
  return listening(server).then((port) => ({
    name,
    port,
    errors,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  }));
}

export const EXPRESS: Adapter = {
  name: "express 5",
  start(options) {
    const errors: unknown[] = [];
    const app = express();
    app.use(expressRateLimit(options));
    app.use((req, res) => {
      res.type("json").send(routeBody((req as RateLimitedRequest).rateLimit));
    });
    // The app's own error handler, as the docs say: a programmer mistake arrives here through next(err).
    app.use((error: unknown, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
      errors.push(error);
      res.status(500).type("json").send(errorBody(error));
    });
    const server = createServer(app).listen(0, "127.0.0.1");
    return running(this.name, server, errors);
  },
};

export const HONO: Adapter = {
  name: "hono (node-server)",
  start(options) {
    const errors: unknown[] = [];
    const app = new Hono<RateLimitEnv>();
    app.use(honoRateLimit(options));
    app.all("*", (c) => c.body(routeBody(c.get("rateLimit")), 200, { "content-type": "application/json" }));
    app.onError((error, c) => {
      errors.push(error);
      return c.body(errorBody(error), 500, { "content-type": "application/json" });
    });
    const server = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }) as Server;
    return running(this.name, server, errors);
  },
};

export const KOA: Adapter = {
  name: "koa",
  start(options) {
    const errors: unknown[] = [];
    const app = new Koa();
    app.silent = true;
    app.use(async (ctx, next) => {
      try {
        await next();
      } catch (error) {
        errors.push(error);
        ctx.status = 500;
        ctx.type = "json";
        ctx.body = errorBody(error);
      }
    });
    app.use(koaRateLimit(options));
    app.use((ctx) => {
      ctx.type = "json";
      ctx.body = routeBody(ctx.state.rateLimit);
    });
    const server = createServer(app.callback()).listen(0, "127.0.0.1");
    return running(this.name, server, errors);
  },
};

/** Node's request as a fetch `Request`, as a small server on Node without a framework would build it. */
function toRequest(req: IncomingMessage): Request {
  const headers = new Headers();
  for (let i = 0; i < req.rawHeaders.length; i += 2) headers.append(req.rawHeaders[i]!, req.rawHeaders[i + 1]!);
  // The request-target as the client wrote it, on a fixed origin (absolute-form targets keep their own).
  const target = req.url ?? "/";
  const url = /^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(target) ? target : `http://127.0.0.1${target.startsWith("/") ? "" : "/"}${target}`;
  return new Request(url, { method: req.method, headers });
}

export const FETCH: Adapter = {
  name: "withRateLimit (node:http)",
  start(options) {
    const errors: unknown[] = [];
    // The decision reaches the inner handler through onDecision: withRateLimit hands it nothing else.
    const decided = new WeakMap<Request, string>();
    const handler = withRateLimit<[string | undefined]>(
      (request: Request, _ip: string | undefined) => {
        const key = decided.get(request);
        return new Response(routeBody(key === undefined ? undefined : { key }), { headers: { "content-type": "application/json" } });
      },
      {
        ...options,
        getClientIp: (_request: Request, ip: string | undefined) => ip,
        onDecision: (info, req) => {
          decided.set(req.raw as Request, info.key);
          options.onDecision?.(info, req);
        },
      },
    );
    const server = createServer((req, res) => {
      let request: Request;
      try {
        request = toRequest(req);
      } catch {
        // A target or header the fetch API refuses: the small server's own 400, before Floodgate.
        res.statusCode = 400;
        res.end();
        return;
      }
      Promise.resolve(handler(request, req.socket.remoteAddress))
        .then(async (response) => {
          res.statusCode = response.status;
          response.headers.forEach((value, name) => res.setHeader(name, value));
          res.end(Buffer.from(await response.arrayBuffer()));
        })
        .catch((error: unknown) => {
          errors.push(error);
          res.statusCode = 500;
          res.setHeader("content-type", "application/json");
          res.end(errorBody(error));
        });
    }).listen(0, "127.0.0.1");
    return running(this.name, server, errors);
  },
};

export const ADAPTERS: readonly Adapter[] = [EXPRESS, HONO, KOA, FETCH];
