import { describe, expect, it } from "vitest";
import { parseRedisUrl } from "@floodgate/upstash-local";

describe("parseRedisUrl", () => {
  it("reads host, port, credentials and database from a redis:// URL", () => {
    expect(parseRedisUrl("redis://127.0.0.1:6380")).toEqual({ host: "127.0.0.1", port: 6380 });
    expect(parseRedisUrl("redis://localhost")).toEqual({ host: "localhost", port: 6379 });
    expect(parseRedisUrl("redis://app:p%40ss@[::1]:7000/2")).toEqual({ host: "::1", port: 7000, username: "app", password: "p@ss", db: 2 });
    expect(parseRedisUrl("redis://:secret@10.0.0.5/0")).toEqual({ host: "10.0.0.5", port: 6379, password: "secret", db: 0 });
  });

  it("reads a unix socket path from unix://", () => {
    expect(parseRedisUrl("unix:///run/redis/redis%20server.sock")).toEqual({ socket: "/run/redis/redis server.sock" });
  });

  it("refuses what it cannot connect to, saying what it accepts", () => {
    expect(() => parseRedisUrl("localhost:6379")).toThrow(
      'must start with redis:// or unix:// (TLS, rediss://, is not supported), got "localhost:6379".',
    );
    expect(() => parseRedisUrl("127.0.0.1:6379")).toThrow('"127.0.0.1:6379" is not a URL');
    expect(() => parseRedisUrl("rediss://cache.example.com")).toThrow("TLS, rediss://, is not supported");
    expect(() => parseRedisUrl("not a url")).toThrow(
      'The Redis URL "not a url" is not a URL. Use redis://host:port or unix:///path/to.sock.',
    );
    expect(() => parseRedisUrl("redis://127.0.0.1/x")).toThrow('invalid database number "x"');
    expect(() => parseRedisUrl("unix://")).toThrow("names no socket path");
  });
});
