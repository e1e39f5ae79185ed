/**
 * The bridge at the HTTP level (raw fetch and node:http): status codes, JSON answers for every
 * failure, argument conversion, the encoding header, keep-alive and pooled Redis connections.
 */
import http from "node:http";
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { type RedisInstance, startRedis } from "../support/redis-server.ts";
import { connectResp, replyToText, type RespClient } from "../../packages/upstash-local/src/resp.ts";
import { startUpstashBridge, type UpstashBridge } from "@floodgate/upstash-local";

let redis: RedisInstance;
let bridge: UpstashBridge;
let admin: RespClient;

beforeAll(async () => {
  redis = await startRedis();
  bridge = await startUpstashBridge({ redis: { host: redis.host, port: redis.port }, token: "secret-token" });
  admin = await connectResp(redis.target);
}, 30_000);

afterAll(async () => {
  admin?.destroy();
  await bridge?.stop();
  await redis?.stop();
});

beforeEach(async () => {
  await admin.call("FLUSHALL");
  bridge.resetCounters();
});

interface Answer {
  status: number;
  contentType: string | null;
  body: unknown;
}

async function post(
  path: string,
  body: unknown,
  init: { token?: string | null; headers?: Record<string, string>; raw?: boolean; method?: string } = {},
): Promise<Answer> {
  const headers: Record<string, string> = { "content-type": "application/json", ...init.headers };
  const token = init.token === undefined ? bridge.token : init.token;
  if (token !== null) headers["authorization"] = `Bearer ${token}`;
  const response = await fetch(`${bridge.url}${path}`, {
    method: init.method ?? "POST",
    headers,
    ...(init.method === "GET" ? {} : { body: init.raw ? (body as string) : JSON.stringify(body) }),
  });
  const text = await response.text();
  return { status: response.status, contentType: response.headers.get("content-type"), body: JSON.parse(text) };
}

async function raw(...args: string[]): Promise<unknown> {
  return replyToText(await admin.call(...args));
}

const b64 = (s: string): string => Buffer.from(s).toString("base64");

describe("routes and authentication", () => {
  it.each(["", "/pipeline", "/multi-exec", "/nope"])("answers 401 JSON on %s without a valid token", async (path) => {
    const body = path === "" ? ["set", "k", "v"] : [["set", "k", "v"]];
    for (const token of [null, "wrong", "", `${bridge.token} extra`, `${bridge.token} ${bridge.token}`]) {
      const answer = await post(path, body, { token });
      expect(answer).toEqual({ status: 401, contentType: "application/json", body: { error: "Unauthorized" } });
    }
    const basic = await post(path, body, { token: null, headers: { authorization: `Basic ${bridge.token}` } });
    expect(basic.status).toBe(401);
    expect(await raw("EXISTS", "k")).toBe(0);
  });

  it("answers 404 JSON on an unknown path", async () => {
    for (const path of ["/get/k", "/pipeline/x", "/subscribe/ch"]) {
      const answer = await post(path, ["get", "k"]);
      expect(answer.status).toBe(404);
      expect(answer.contentType).toBe("application/json");
      expect(answer.body).toEqual({ error: expect.stringContaining(path) });
    }
    expect(bridge.requests.byPath).toEqual({ "/get/k": 1, "/pipeline/x": 1, "/subscribe/ch": 1 });
  });

  it("answers 405 JSON to GET", async () => {
    const answer = await post("", undefined, { method: "GET" });
    expect(answer.status).toBe(405);
    expect(answer.body).toEqual({ error: expect.any(String) });
  });

  it("only serves under its prefix when it has one", async () => {
    const prefixed = await startUpstashBridge({ redis: { host: redis.host, port: redis.port }, pathPrefix: "x" });
    try {
      const call = (path: string): Promise<Response> =>
        fetch(`http://127.0.0.1:${prefixed.port}${path}`, {
          method: "POST",
          headers: { authorization: `Bearer ${prefixed.token}` },
          body: JSON.stringify(path.endsWith("pipeline") ? [["ping"]] : ["ping"]),
        });
      expect((await call("/x")).status).toBe(200);
      expect((await call("/x/")).status).toBe(200);
      expect((await call("/x/pipeline")).status).toBe(200);
      expect((await call("/pipeline")).status).toBe(404);
      expect((await call("/")).status).toBe(404);
      expect((await call("/xy/pipeline")).status).toBe(404);
      expect(prefixed.requests).toEqual({
        total: 6,
        byPath: { "/": 2, "/pipeline": 1, "outside:/pipeline": 1, "outside:/": 1, "outside:/xy/pipeline": 1 },
      });
    } finally {
      await prefixed.stop();
    }
  });
});

describe("request bodies", () => {
  it.each([
    ["", "{not json"],
    ["/pipeline", '[["get","k"]'],
    ["/multi-exec", ""],
  ])("answers 400 JSON to malformed JSON on '%s'", async (path, text) => {
    const answer = await post(path, text, { raw: true });
    expect(answer.status).toBe(400);
    expect(answer.contentType).toBe("application/json");
    expect(answer.body).toEqual({ error: expect.stringMatching(/JSON/) });
  });

  it.each([
    ["", {}],
    ["", []],
    ["", "get"],
    ["", [["get", "k"]]],
    ["", ["set", "k", null]],
    ["", ["set", "k", { a: 1 }]],
    ["", ["set", "k", ["v"]]],
    ["/pipeline", ["get", "k"]],
    ["/pipeline", []],
    ["/pipeline", [["get", "k"], []]],
    ["/pipeline", [["set", "k", "v"], ["set", "k2", null]]],
    ["/multi-exec", { commands: [] }],
    ["/multi-exec", []],
    ["/multi-exec", ["set", "k", "v"]],
    ["/multi-exec", [["set", "k", "v"], ["exec"]]],
    ["/multi-exec", [["set", "k", "v"], ["discard"]]],
    ["/pipeline", [["subscribe", "ch"]]],
    ["", ["hello", "3"]],
    ["", ["client", "reply", "off"]],
  ])("answers 400 JSON to a body of the wrong shape on '%s': %j, running nothing", async (path, body) => {
    const answer = await post(path, body);
    expect(answer.status).toBe(400);
    expect(answer.body).toEqual({ error: expect.any(String) });
    expect(await raw("DBSIZE")).toBe(0);
  });

  it("converts arguments: strings as UTF-8, numbers with String(n), booleans as true/false", async () => {
    const answer = await post("/pipeline", [
      ["set", "str", "héllo 🌊"],
      ["set", "int", 42],
      ["set", "float", 1.5],
      ["set", "huge", 1e21],
      ["set", "neg", -0.25],
      ["set", "yes", true],
      ["set", "no", false],
      ["SET", "upper", "case-insensitive command"],
      ["incrby", "int", 8],
    ]);
    expect(answer.status).toBe(200);
    expect(await raw("MGET", "str", "int", "float", "huge", "neg", "yes", "no", "upper")).toEqual([
      "héllo 🌊",
      "50",
      "1.5",
      "1e+21",
      "-0.25",
      "true",
      "false",
      "case-insensitive command",
    ]);
  });

  it("does not insist on the content type", async () => {
    const response = await fetch(bridge.url, {
      method: "POST",
      headers: { authorization: `Bearer ${bridge.token}`, "content-type": "text/plain" },
      body: JSON.stringify(["set", "k", "v"]),
    });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ result: "OK" });
  });

  it("accepts a body over 200 KB and answers one over 200 KB", async () => {
    const value = "é".repeat(150_000); // 300 KB of UTF-8
    const set = await post("/pipeline", [["set", "big", value], ["strlen", "big"]]);
    expect(set.body).toEqual([{ result: "OK" }, { result: 300_000 }]);
    const get = await post("", ["get", "big"], { headers: { "upstash-encoding": "base64" } });
    expect(get.body).toEqual({ result: b64(value) });
  });

  it("refuses a body over its limit with 413 JSON", async () => {
    const small = await startUpstashBridge({ redis: { host: redis.host, port: redis.port }, maxBodyBytes: 1024 });
    try {
      const response = await fetch(small.url, {
        method: "POST",
        headers: { authorization: `Bearer ${small.token}` },
        body: JSON.stringify(["set", "k", "x".repeat(2048)]),
      });
      expect(response.status).toBe(413);
      expect(await response.json()).toEqual({ error: expect.any(String) });
      expect(await raw("EXISTS", "k")).toBe(0);
    } finally {
      await small.stop();
    }
  });
});

describe("results and the Upstash-Encoding header", () => {
  beforeEach(async () => {
    await admin.call("RPUSH", "l", "OK", "bar", "PONG");
    await admin.call("SET", "bar", "bar");
    await admin.call("SET", "bin", Buffer.from([0xff, 0xfe, 0x41, 0x00]));
  });

  it("without the header: raw strings, nested arrays, numbers and nil", async () => {
    expect((await post("", ["get", "bar"])).body).toEqual({ result: "bar" });
    expect((await post("", ["lrange", "l", 0, -1])).body).toEqual({ result: ["OK", "bar", "PONG"] });
    expect((await post("", ["type", "l"])).body).toEqual({ result: "list" });
    expect((await post("", ["llen", "l"])).body).toEqual({ result: 3 });
    expect((await post("", ["get", "missing"])).body).toEqual({ result: null });
    expect((await post("", ["eval", "return {1, {'OK', false}, 'x'}", 0])).body).toEqual({
      result: [1, ["OK", null], "x"],
    });
    // Not binary-safe without encoding, as with the real service.
    expect((await post("", ["get", "bin"])).body).toEqual({ result: "\uFFFD\uFFFDA\u0000" });
  });

  it.each(["base64", "BASE64", "Base64"])("with '%s': every string at every depth, from the raw bytes", async (value) => {
    const headers = { "upstash-encoding": value };
    expect((await post("", ["get", "bar"], { headers })).body).toEqual({ result: b64("bar") });
    expect((await post("", ["ping"], { headers })).body).toEqual({ result: b64("PONG") });
    expect((await post("", ["type", "l"], { headers })).body).toEqual({ result: b64("list") });
    expect((await post("", ["lrange", "l", 0, -1], { headers })).body).toEqual({
      result: [b64("OK"), b64("bar"), b64("PONG")],
    });
    expect((await post("", ["eval", "return {1, {'OK', false, {'bar'}}, redis.status_reply('QUEUED')}", 0], { headers })).body).toEqual({
      result: [1, [b64("OK"), null, [b64("bar")]], b64("QUEUED")],
    });
    expect((await post("", ["llen", "l"], { headers })).body).toEqual({ result: 3 });
    expect((await post("", ["get", "missing"], { headers })).body).toEqual({ result: null });
    // A top-level OK may stay raw; the client keeps it as is.
    expect((await post("", ["set", "k", "v"], { headers })).body).toEqual({ result: "OK" });
    const bin = (await post("", ["get", "bin"], { headers })).body as { result: string };
    expect(Buffer.from(bin.result, "base64")).toEqual(Buffer.from([0xff, 0xfe, 0x41, 0x00]));
  });

  it("never encodes errors; /pipeline answers one entry per command in order", async () => {
    const headers = { "upstash-encoding": "base64" };
    const single = await post("", ["incr", "bar"], { headers });
    expect(single).toEqual({
      status: 400,
      contentType: "application/json",
      body: { error: "ERR value is not an integer or out of range" },
    });
    const pipeline = await post("/pipeline", [["get", "bar"], ["incr", "bar"], ["set", "n", 1], ["incr", "n"], ["nope"]], { headers });
    expect(pipeline.status).toBe(200);
    expect(pipeline.body).toEqual([
      { result: b64("bar") },
      { error: "ERR value is not an integer or out of range" },
      { result: "OK" },
      { result: 2 },
      { error: expect.stringMatching(/^ERR unknown command 'nope'/) },
    ]);
  });

  it("/multi-exec: EXEC-time errors per entry; EXECABORT answers 400", async () => {
    const ran = await post("/multi-exec", [["set", "m", "abcd"], ["incr", "m"], ["get", "m"]], {
      headers: { "upstash-encoding": "base64" },
    });
    expect(ran).toEqual({
      status: 200,
      contentType: "application/json",
      body: [{ result: "OK" }, { error: "ERR value is not an integer or out of range" }, { result: b64("abcd") }],
    });
    const aborted = await post("/multi-exec", [["set", "x", "1"], ["nope"], ["set", "y", "1"]]);
    expect(aborted.status).toBe(400);
    expect(aborted.body).toEqual({ error: expect.stringMatching(/^EXECABORT/) });
    expect(await raw("EXISTS", "x", "y")).toBe(0);
  });
});

describe("pooled Redis connections", () => {
  it("SELECT and MULTI at / or in /pipeline never reach the next request", async () => {
    await admin.call("SET", "k", "db0");
    expect((await post("", ["select", "2"])).body).toEqual({ result: "OK" });
    expect((await post("", ["get", "k"])).body).toEqual({ result: "db0" });
    expect((await post("/pipeline", [["select", "3"], ["set", "k", "db3"]])).body).toEqual([{ result: "OK" }, { result: "OK" }]);
    expect((await post("", ["get", "k"])).body).toEqual({ result: "db0" });
    expect((await post("", ["multi"])).body).toEqual({ result: "OK" });
    expect((await post("", ["get", "k"])).body).toEqual({ result: "db0" });
    expect((await post("/pipeline", [["multi"], ["set", "k", "tx"], ["exec"]])).body).toEqual([
      { result: "OK" },
      { result: "QUEUED" },
      { result: ["OK"] },
    ]);
    expect((await post("", ["get", "k"])).body).toEqual({ result: "tx" });
    // The SELECT really happened, on a connection nobody reuses.
    await admin.call("SELECT", "3");
    expect(await raw("GET", "k")).toBe("db3");
    await admin.call("SELECT", "0");
  });

  it("an error reply retires its connection; healthy ones are reused", async () => {
    await post("", ["ping"]);
    const { reused, discarded } = bridge.pool;
    for (let i = 0; i < 5; i++) await post("", ["ping"]);
    expect(bridge.pool.reused - reused).toBe(5);
    expect(bridge.pool.discarded).toBe(discarded);
    await post("", ["nope"]);
    expect(bridge.pool.discarded).toBe(discarded + 1);
  });

  it("concurrent requests never share a connection: a transaction runs while another request blocks", async () => {
    const blocked = post("", ["blpop", "q", 0]);
    await vi.waitFor(async () => expect(await raw("INFO", "clients")).toMatch(/blocked_clients:1\b/), {
      timeout: 5000,
      interval: 10,
    });
    // On a shared connection this would queue behind BLPOP forever: bound it.
    const response = await fetch(`${bridge.url}/multi-exec`, {
      method: "POST",
      headers: { authorization: `Bearer ${bridge.token}` },
      body: JSON.stringify([["rpush", "q", "job"], ["incr", "n"]]),
      signal: AbortSignal.timeout(5000),
    });
    expect(await response.json()).toEqual([{ result: 1 }, { result: 1 }]);
    expect((await blocked).body).toEqual({ result: ["q", "job"] });
  });

  it("a request aborted while Redis blocks destroys that connection", async () => {
    const controller = new AbortController();
    const blocked = fetch(bridge.url, {
      method: "POST",
      headers: { authorization: `Bearer ${bridge.token}` },
      body: JSON.stringify(["blpop", "queue", 0]),
      signal: controller.signal,
    });
    const blockedClients = async (): Promise<number> => Number(/blocked_clients:(\d+)/.exec(String(await raw("INFO", "clients")))?.[1]);
    await vi.waitFor(async () => expect(await blockedClients()).toBe(1), { timeout: 5000, interval: 10 });
    const discarded = bridge.pool.discarded;
    controller.abort();
    await expect(blocked).rejects.toThrow();
    await vi.waitFor(async () => expect(await blockedClients()).toBe(0), { timeout: 5000, interval: 10 });
    expect(bridge.pool.discarded).toBe(discarded + 1);
    // Nothing is left waiting to swallow the next push.
    expect((await post("", ["rpush", "queue", "job"])).body).toEqual({ result: 1 });
    expect(await raw("LRANGE", "queue", "0", "-1")).toEqual(["job"]);
  });

  it("answers 503 JSON while Redis is down and recovers when it is back", async () => {
    const own = await startRedis({ unixSocket: true });
    const front = await startUpstashBridge({ redis: { socket: own.socket as string } });
    const call = async (body: unknown): Promise<Answer> => {
      const response = await fetch(front.url, {
        method: "POST",
        headers: { authorization: `Bearer ${front.token}` },
        body: JSON.stringify(body),
      });
      return { status: response.status, contentType: response.headers.get("content-type"), body: await response.json() };
    };
    try {
      expect((await call(["set", "k", "v"])).body).toEqual({ result: "OK" });
      await own.stop();
      const down = await call(["get", "k"]);
      expect(down.status).toBeGreaterThanOrEqual(500);
      expect(down.contentType).toBe("application/json");
      expect(down.body).toEqual({ error: expect.stringMatching(/redis/) });
    } finally {
      await front.stop();
      await own.stop();
    }
  });
});

describe("keep-alive", () => {
  it("serves several requests, one over 200 KB, on one reused socket", async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const request = (body: unknown, token = bridge.token): Promise<{ status: number; reused: boolean; body: unknown }> =>
      new Promise((resolve, reject) => {
        const payload = JSON.stringify(body);
        const req = http.request(
          `${bridge.url}/pipeline`,
          {
            method: "POST",
            agent,
            headers: { authorization: `Bearer ${token}`, "content-length": Buffer.byteLength(payload) },
          },
          (res) => {
            const chunks: Buffer[] = [];
            res.on("data", (c: Buffer) => chunks.push(c));
            res.on(
              "end",
              () => resolve({ status: res.statusCode ?? 0, reused: req.reusedSocket, body: JSON.parse(Buffer.concat(chunks).toString()) }),
            );
          },
        );
        req.on("error", reject);
        req.end(payload);
      });
    try {
      const before = bridge.httpConnections;
      const first = await request([["set", "big", "x".repeat(250_000)]]);
      const second = await request([["strlen", "big"]]);
      const unauthorized = await request([["set", "big", "x".repeat(250_000)]], "wrong");
      const afterUnauthorized = await request([["get", "missing"]]);
      expect(first).toEqual({ status: 200, reused: false, body: [{ result: "OK" }] });
      expect(second).toEqual({ status: 200, reused: true, body: [{ result: 250_000 }] });
      expect(unauthorized).toEqual({ status: 401, reused: true, body: { error: "Unauthorized" } });
      expect(afterUnauthorized).toEqual({ status: 200, reused: true, body: [{ result: null }] });
      expect(bridge.httpConnections - before).toBe(1);
    } finally {
      agent.destroy();
    }
  });
});

describe("corsOrigin (off by default; on for the browser test's page)", () => {
  const ORIGIN = "http://127.0.0.1:45678";
  const preflight = (url: string, origin: string): Promise<Response> =>
    fetch(`${url}/pipeline`, {
      method: "OPTIONS",
      headers: {
        origin,
        "access-control-request-method": "POST",
        "access-control-request-headers": "authorization,content-type,upstash-encoding",
      },
    });
  const postFrom = (target: UpstashBridge, origin: string): Promise<Response> =>
    fetch(`${target.url}/`, {
      method: "POST",
      headers: { origin, authorization: `Bearer ${target.token}`, "content-type": "application/json" },
      body: JSON.stringify(["ping"]),
    });

  it("without the option: no CORS header on any answer, and a preflight is refused like any unauthenticated request", async () => {
    const answer = await postFrom(bridge, ORIGIN);
    expect(answer.status).toBe(200);
    expect(await answer.json()).toEqual({ result: "PONG" });
    expect([...answer.headers.keys()].filter((h) => h.startsWith("access-control-"))).toEqual([]);
    const refused = await preflight(bridge.url, ORIGIN);
    expect(refused.status).toBe(401);
    expect(refused.headers.get("access-control-allow-origin")).toBeNull();
    await refused.text();
  });

  it("with it: that origin's preflight gets 204 allowing POST and the asked headers, uncounted; its answers carry the origin; others get nothing", async () => {
    const cors = await startUpstashBridge({ redis: { host: redis.host, port: redis.port }, corsOrigin: ORIGIN });
    try {
      const ok = await preflight(cors.url, ORIGIN);
      expect(ok.status).toBe(204);
      expect(ok.headers.get("access-control-allow-origin")).toBe(ORIGIN);
      expect(ok.headers.get("access-control-allow-methods")).toBe("POST");
      expect(ok.headers.get("access-control-allow-headers")).toBe("authorization,content-type,upstash-encoding");
      expect(cors.requests.total).toBe(0);

      const answer = await postFrom(cors, ORIGIN);
      expect(answer.status).toBe(200);
      expect(await answer.json()).toEqual({ result: "PONG" });
      expect(answer.headers.get("access-control-allow-origin")).toBe(ORIGIN);
      expect(answer.headers.get("access-control-expose-headers")).toBe("upstash-sync-token");

      // Still authenticated: a wrong token is refused (with the header, so the page can read why).
      const wrong = await fetch(`${cors.url}/`, {
        method: "POST",
        headers: { origin: ORIGIN, authorization: "Bearer nope" },
        body: '["ping"]',
      });
      expect(wrong.status).toBe(401);
      await wrong.text();

      const elsewhere = "http://127.0.0.1:45679";
      const refused = await preflight(cors.url, elsewhere);
      expect(refused.status).toBe(401);
      expect(refused.headers.get("access-control-allow-origin")).toBeNull();
      await refused.text();
      const other = await postFrom(cors, elsewhere);
      expect(other.headers.get("access-control-allow-origin")).toBeNull();
      await other.text();
    } finally {
      await cors.stop();
    }
  });
});
