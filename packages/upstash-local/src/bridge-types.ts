// The public types of the local Upstash bridge (upstash-bridge.ts).
import type http from "node:http";

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
