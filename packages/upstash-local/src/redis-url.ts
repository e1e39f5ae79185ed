import type { RedisEndpoint } from "./upstash-bridge.ts";

/**
 * `redis://[user:password@]host[:port][/db]` or `unix:///path/to.sock` → the endpoint
 * `startUpstashBridge` connects to. TLS (`rediss://`) is not supported: the server is meant to
 * sit next to a local or CI redis-server.
 */
export function parseRedisUrl(raw: string): RedisEndpoint {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new TypeError(`The Redis URL "${raw}" is not a URL. Use redis://host:port or unix:///path/to.sock.`);
  }
  if (url.protocol === "unix:") {
    const socket = decodeURIComponent(url.pathname);
    if (socket === "" || socket === "/") throw new TypeError(`The Redis URL "${raw}" names no socket path. Use unix:///path/to.sock.`);
    return { socket };
  }
  if (url.protocol !== "redis:") {
    throw new TypeError(
      `The Redis URL must start with redis:// or unix:// (TLS, rediss://, is not supported), got "${raw}".`,
    );
  }
  const db = url.pathname.length > 1 ? Number(url.pathname.slice(1)) : undefined;
  if (db !== undefined && !(Number.isInteger(db) && db >= 0)) {
    throw new TypeError(`The Redis URL "${raw}" has an invalid database number "${url.pathname.slice(1)}": use a whole number such as /0.`);
  }
  return {
    host: url.hostname.replace(/^\[|\]$/g, "") || "127.0.0.1",
    port: url.port === "" ? 6379 : Number(url.port),
    ...(url.password !== "" ? { password: decodeURIComponent(url.password) } : {}),
    ...(url.username !== "" ? { username: decodeURIComponent(url.username) } : {}),
    ...(db !== undefined ? { db } : {}),
  };
}
