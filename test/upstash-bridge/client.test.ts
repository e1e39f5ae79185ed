/**
 * Conformance of the local Upstash bridge, driven through the REAL `@upstash/redis` client
 * against a private redis-server. Every value is checked against what Redis itself holds, so a
 * bridge that mis-encodes, mis-routes or shares connections fails here.
 */
import { Redis, type RedisConfigNodejs } from "@upstash/redis";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { type RedisInstance, startRedis } from "../support/redis-server.ts";
import { connectResp, replyToText, type RespClient } from "../../packages/upstash-local/src/resp.ts";
import { type BridgeRequest, startUpstashBridge, type UpstashBridge } from "@floodgate/upstash-local";

let redis: RedisInstance;
let bridge: UpstashBridge;
let admin: RespClient;
const seen: BridgeRequest[] = [];

beforeAll(async () => {
  redis = await startRedis();
  bridge = await startUpstashBridge({
    redis: { host: redis.host, port: redis.port },
    onRequest: (request) => seen.push(request),
  });
  admin = await connectResp(redis.target);
}, 30_000);

afterAll(async () => {
  admin?.destroy();
  await bridge?.stop();
  await redis?.stop();
});

beforeEach(async () => {
  await admin.call("FLUSHALL");
  await admin.call("SCRIPT", "FLUSH");
  bridge.resetCounters();
  seen.length = 0;
});

/** What Redis itself holds, as text. */
async function raw(...args: string[]): Promise<unknown> {
  return replyToText(await admin.call(...args));
}

function defaultClient(): Redis {
  return new Redis({ url: bridge.url, token: bridge.token });
}

function plainClient(extra: Partial<RedisConfigNodejs> = {}): Redis {
  return new Redis({ url: bridge.url, token: bridge.token, enableAutoPipelining: false, ...extra });
}

const TRAPS = {
  "t:bar": "bar", // valid base64 when left unencoded
  "t:abcd": "abcd",
  "t:pong": "PONG",
  "t:hash": "hash",
  "t:ok": "OK",
  "t:value": "value", // not valid base64: a bridge that forgets to encode still "works" here
  "t:unicode": "héllo wörld 🌊 日本",
} as const;

describe("default client (auto-pipelining, base64, read-your-writes, telemetry)", () => {
  it("sends an awaited command as a one-command /pipeline request, base64 requested", async () => {
    const client = defaultClient();
    expect(await client.set("k", "bar")).toBe("OK");
    expect(await client.get("k")).toBe("bar");
    expect(bridge.requests).toEqual({ total: 2, byPath: { "/pipeline": 2 } });
    expect(seen.map((r) => r.body)).toEqual([[["set", "k", "bar"]], [["get", "k"]]]);
    expect(seen[0]?.headers["upstash-encoding"]).toBe("base64");
    expect(await raw("GET", "k")).toBe("bar");
  });

  it("round-trips the base64 traps, batching same-tick writes and reads into one request each", async () => {
    const client = defaultClient();
    const entries = Object.entries(TRAPS);
    expect(await Promise.all(entries.map(([k, v]) => client.set(k, v)))).toEqual(entries.map(() => "OK"));
    expect(bridge.requests).toEqual({ total: 1, byPath: { "/pipeline": 1 } });
    expect(await Promise.all(entries.map(([k]) => client.get(k)))).toEqual(entries.map(([, v]) => v));
    expect(bridge.requests).toEqual({ total: 2, byPath: { "/pipeline": 2 } });
    for (const [k, v] of entries) expect(await raw("GET", k)).toBe(v);
  });

  it("batches reads and writes of the same tick separately", async () => {
    const client = defaultClient();
    await Promise.all([client.set("a", "1"), client.get("a"), client.set("b", "2"), client.get("b")]);
    expect(bridge.requests).toEqual({ total: 2, byPath: { "/pipeline": 2 } });
    expect(seen.map((r) => (r.body as unknown[]).length).sort()).toEqual([2, 2]);
  });

  it("splits 2500 same-tick writes into batches of at most 1000", async () => {
    const client = defaultClient();
    await Promise.all(Array.from({ length: 2500 }, (_, i) => client.set(`many:${i}`, i)));
    expect(bridge.requests).toEqual({ total: 3, byPath: { "/pipeline": 3 } });
    expect(seen.map((r) => (r.body as unknown[]).length)).toEqual([1000, 1000, 500]);
    expect(await raw("DBSIZE")).toBe(2500);
  });

  it("decodes status replies other than OK (PING, TYPE)", async () => {
    const client = defaultClient();
    await client.hset("h", { f: "1" });
    await client.set("s", "x");
    await client.rpush("l", "x");
    const [pong, echoed, typeHash, typeString, typeList, typeNone] = await Promise.all([
      client.ping(),
      client.ping(["abcd"]),
      client.type("h"),
      client.type("s"),
      client.type("l"),
      client.type("missing"),
    ]);
    expect([pong, echoed, typeHash, typeString, typeList, typeNone]).toEqual(["PONG", "abcd", "hash", "string", "list", "none"]);
  });

  it("decodes a top-level status reply other than OK and PONG (QUEUED, from Lua)", async () => {
    const client = defaultClient();
    expect(await client.eval("return redis.status_reply('QUEUED')", [], [])).toBe("QUEUED");
    expect(await plainClient().eval("return redis.status_reply('QUEUED')", [], [])).toBe("QUEUED");
  });

  it("decodes strings inside arrays, including OK (which unencoded would decode to '8')", async () => {
    const client = defaultClient();
    await client.rpush("l", "OK", "abcd", "bar", "PONG", "value");
    expect(await client.lrange("l", 0, -1)).toEqual(["OK", "abcd", "bar", "PONG", "value"]);
    await client.mset({ a: "OK", b: "bar" });
    expect(await client.mget("a", "missing", "b")).toEqual(["OK", null, "bar"]);
    await client.hset("h", { f1: "OK", f2: "abcd" });
    expect(await client.hgetall("h")).toEqual({ f1: "OK", f2: "abcd" });
    // Status replies (not bulk) inside an array.
    expect(
      await client.eval("return {redis.call('set', KEYS[1], 'v'), redis.status_reply('PONG')}", ["k"], []),
    ).toEqual(["OK", "PONG"]);
  });

  it("decodes nested arrays: SCAN, Lua tables with nil and integers, MGET with nils", async () => {
    const client = defaultClient();
    const keys = Array.from({ length: 40 }, (_, i) => `scan:${i}`);
    await Promise.all(keys.map((k) => client.set(k, "OK")));
    await client.set("other", "x");
    const found: string[] = [];
    let cursor: string | number = 0;
    do {
      const [next, batch]: [string | number, string[]] = await client.scan(cursor, { match: "scan:*", count: 7 });
      found.push(...batch);
      cursor = next;
    } while (String(cursor) !== "0");
    expect(new Set(found)).toEqual(new Set(keys));

    const nested = await client.eval(
      "return {1, {'a', {'OK', 'bar', {'PONG'}}}, false, 'abcd', {}, -7, true}",
      [],
      [],
    );
    expect(nested).toEqual([1, ["a", ["OK", "bar", ["PONG"]]], null, "abcd", [], -7, 1]);
    expect(await client.mget("scan:1", "nope", "scan:2", "nope2")).toEqual(["OK", null, "OK", null]);
  });

  it("hands invalid UTF-8 to the client as U+FFFD, like the real service", async () => {
    await admin.call("SET", "bin", Buffer.from([0xff, 0x41, 0xfe]));
    expect(await defaultClient().get("bin")).toBe("\uFFFDA\uFFFD");
    expect(await plainClient({ responseEncoding: false }).get("bin")).toBe("\uFFFDA\uFFFD");
  });

  it("keeps numbers numbers and floats arrive as strings the client parses", async () => {
    const client = defaultClient();
    expect(await client.incrby("n", 41)).toBe(41);
    expect(await client.incrbyfloat("f", 1.25)).toBe(1.25);
    await client.zadd("z", { score: 2.5, member: "m" });
    expect(await client.zscore("z", "m")).toBe(2.5);
    expect(await client.get("n")).toBe(41);
  });

  it("echoes the previous 2xx response's upstash-sync-token (read-your-writes)", async () => {
    const client = defaultClient();
    await client.set("a", "1");
    const afterFirst = bridge.lastSyncToken;
    await client.get("a");
    expect(seen[0]?.headers["upstash-sync-token"]).toBe("");
    expect(seen[1]?.headers["upstash-sync-token"]).toBe(afterFirst);

    const noRyw = new Redis({ url: bridge.url, token: bridge.token, readYourWrites: false });
    await noRyw.get("a");
    expect(seen[2]?.headers["upstash-sync-token"]).toBeUndefined();
  });

  it("sends telemetry headers unless disabled, and the bridge ignores them", async () => {
    await defaultClient().get("a");
    const expectTelemetry = !process.env["UPSTASH_DISABLE_TELEMETRY"];
    expect(seen[0]?.headers["upstash-telemetry-sdk"] !== undefined).toBe(expectTelemetry);
    if (expectTelemetry) {
      expect(seen[0]?.headers["upstash-telemetry-sdk"]).toMatch(/^@upstash\/redis@v?1\.39\./);
      expect(seen[0]?.headers["upstash-telemetry-runtime"]).toBe(`node@${process.version}`);
    }
    await new Redis({ url: bridge.url, token: bridge.token, enableTelemetry: false }).get("a");
    expect(seen[1]?.headers["upstash-telemetry-sdk"]).toBeUndefined();
  });

  it("serializes objects and booleans as the client does, and deserializes JSON", async () => {
    const client = defaultClient();
    await client.set("obj", { a: 1, b: ["OK", null] });
    await client.set("bool", true);
    expect(await raw("GET", "obj")).toBe('{"a":1,"b":["OK",null]}');
    expect(await raw("GET", "bool")).toBe("true");
    expect(await client.get("obj")).toEqual({ a: 1, b: ["OK", null] });
    expect(await client.get("bool")).toBe(true);
  });
});

describe("enableAutoPipelining: false", () => {
  it("sends each command to / and round-trips the traps", async () => {
    const client = plainClient();
    for (const [k, v] of Object.entries(TRAPS)) {
      expect(await client.set(k, v)).toBe("OK");
      expect(await client.get(k)).toBe(v);
    }
    expect(await client.ping()).toBe("PONG");
    await client.hset("h", { f: "v" });
    expect(await client.type("h")).toBe("hash");
    const n = Object.keys(TRAPS).length * 2 + 3;
    expect(bridge.requests).toEqual({ total: n, byPath: { "/": n } });
    expect(seen[0]?.body).toEqual(["set", "t:bar", "bar"]);
  });
});

describe("responseEncoding: false", () => {
  it("asks for raw strings and still gets every value right", async () => {
    for (
      const client of [
        new Redis({ url: bridge.url, token: bridge.token, responseEncoding: false }),
        plainClient({ responseEncoding: false }),
      ]
    ) {
      await admin.call("FLUSHALL");
      seen.length = 0;
      for (const [k, v] of Object.entries(TRAPS)) await client.set(k, v);
      for (const [k, v] of Object.entries(TRAPS)) expect(await client.get(k)).toBe(v);
      await client.rpush("l", "OK", "bar", "PONG");
      expect(await client.lrange("l", 0, -1)).toEqual(["OK", "bar", "PONG"]);
      expect(await client.ping()).toBe("PONG");
      expect(await client.type("l")).toBe("list");
      expect(await client.eval("return {1, {'OK', false}}", [], [])).toEqual([1, ["OK", null]]);
      expect(seen.every((r) => r.headers["upstash-encoding"] === undefined)).toBe(true);
    }
  });
});

describe("errors", () => {
  it("a command error at / rejects with Redis's text", async () => {
    const client = plainClient();
    await client.set("s", "x");
    await expect(client.incr("s")).rejects.toThrow(
      /^ERR value is not an integer or out of range, command was: \["incr","s"\]$/,
    );
    // Also for a command the default client sends to / (LRANGE is excluded from auto-pipelining).
    await expect(defaultClient().lrange("s", 0, -1)).rejects.toThrow(/^WRONGTYPE /);
    expect(bridge.requests.byPath["/"]).toBe(3);
  });

  it("an auto-pipelined error fails only its own command", async () => {
    const client = defaultClient();
    await client.set("s", "x");
    bridge.resetCounters();
    const results = await Promise.allSettled([client.set("a", "1"), client.incr("s"), client.set("b", "2")]);
    expect(results.map((r) => r.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
    expect(String((results[1] as PromiseRejectedResult).reason)).toMatch(/Command failed: ERR value is not an integer/);
    expect(bridge.requests).toEqual({ total: 1, byPath: { "/pipeline": 1 } });
    expect([await raw("GET", "a"), await raw("GET", "b")]).toEqual(["1", "2"]);
  });

  it("an error inside /pipeline: exec() throws, exec({ keepErrors }) returns it in place", async () => {
    const client = defaultClient();
    await client.set("s", "x");
    const build = (): ReturnType<Redis["pipeline"]> => client.pipeline().set("p", "bar").incr("s").get("p").ping();
    await expect(build().exec()).rejects.toThrow(/^Command 2 \[ incr \] failed: ERR value is not an integer/);
    expect(await raw("GET", "p")).toBe("bar"); // a pipeline is not atomic: the others ran
    const kept = await build().exec({ keepErrors: true });
    expect(kept).toEqual([
      { result: "OK", error: undefined },
      { result: undefined, error: expect.stringMatching(/^ERR value is not an integer/) },
      { result: "bar", error: undefined },
      { result: "PONG", error: undefined },
    ]);
  });

  it("an error raised by EXEC inside /multi-exec fails that entry while the others ran", async () => {
    const client = defaultClient();
    const build = (): ReturnType<Redis["multi"]> => client.multi().set("m", "abcd").incr("m").get("m").type("m");
    await expect(build().exec()).rejects.toThrow(/^Command 2 \[ incr \] failed: ERR value is not an integer/);
    expect(await build().exec({ keepErrors: true })).toEqual([
      { result: "OK", error: undefined },
      { result: undefined, error: expect.stringMatching(/^ERR value is not an integer/) },
      { result: "abcd", error: undefined },
      { result: "string", error: undefined },
    ]);
    expect(bridge.requests.byPath["/multi-exec"]).toBe(2);
  });

  it("EXECABORT: a command rejected at queue time discards the whole transaction", async () => {
    const client = defaultClient();
    // HSET with no field is refused when queued, so EXEC answers EXECABORT.
    const tx = client.multi().set("x", "1").hset("h", {}).set("y", "2");
    await expect(tx.exec()).rejects.toThrow(/^EXECABORT Transaction discarded because of previous errors/);
    expect(await raw("EXISTS", "x", "y")).toBe(0);
    // The bridge is still healthy afterwards.
    expect(await client.multi().set("x", "1").get("x").exec()).toEqual(["OK", 1]);
  });
});

describe("transactions", () => {
  it("concurrent multi() calls never interleave", async () => {
    const client = defaultClient();
    const results = await Promise.all(
      Array.from({ length: 30 }, () => client.multi().incr("c").incr("c").get("c").exec()),
    );
    for (const [first, second, read] of results as [number, number, number][]) {
      expect(second).toBe(first + 1);
      expect(read).toBe(second);
    }
    expect((results as [number, number, number][]).map(([first]) => first).sort((a, b) => a - b)).toEqual(
      Array.from({ length: 30 }, (_, i) => 2 * i + 1),
    );
    expect(bridge.requests).toEqual({ total: 30, byPath: { "/multi-exec": 30 } });
  });

  it("concurrent good and aborted transactions do not affect one another", async () => {
    const client = defaultClient();
    const runs = await Promise.allSettled(
      Array.from(
        { length: 20 },
        (_, i) => i % 2 === 0 ? client.multi().incr("good").exec() : client.multi().incr("bad").hset("h", {}).exec(),
      ),
    );
    expect(runs.filter((r) => r.status === "fulfilled")).toHaveLength(10);
    expect(runs.filter((r) => r.status === "rejected")).toHaveLength(10);
    expect(await raw("GET", "good")).toBe("10");
    expect(await raw("EXISTS", "bad")).toBe(0);
  });
});

describe("scripts", () => {
  const SOURCE = "return {KEYS[1], ARGV[1], redis.call('incr', KEYS[1] .. ':n')}";

  it("createScript().exec falls back from NOSCRIPT to EVAL through / after SCRIPT FLUSH", async () => {
    const client = plainClient();
    const script = client.createScript(SOURCE);
    expect(await script.exec(["k"], ["bar"])).toEqual(["k", "bar", 1]);
    expect(bridge.requests).toEqual({ total: 2, byPath: { "/": 2 } });
    expect(seen.map((r) => (r.body as string[])[0])).toEqual(["evalsha", "eval"]);
    // Cached now: one request.
    expect(await script.exec(["k"], ["abcd"])).toEqual(["k", "abcd", 2]);
    expect(bridge.requests.total).toBe(3);
    await client.scriptFlush();
    bridge.resetCounters();
    expect(await script.exec(["k"], ["OK"])).toEqual(["k", "OK", 3]);
    expect(bridge.requests).toEqual({ total: 2, byPath: { "/": 2 } });
  });

  it("createScript().exec falls back through /pipeline with the default client", async () => {
    const client = defaultClient();
    const script = client.createScript(SOURCE);
    expect(await script.exec(["k"], ["PONG"])).toEqual(["k", "PONG", 1]);
    expect(bridge.requests).toEqual({ total: 2, byPath: { "/pipeline": 2 } });
    expect(seen.map((r) => (r.body as string[][])[0]?.[0])).toEqual(["evalsha", "eval"]);
    expect(await script.exec(["k"], ["x"])).toEqual(["k", "x", 2]);
    expect(bridge.requests.total).toBe(3);
  });

  it("createScript().exec falls back through /pipeline again after SCRIPT FLUSH once cached", async () => {
    const client = defaultClient();
    const script = client.createScript(SOURCE);
    expect(await script.exec(["k"], ["a"])).toEqual(["k", "a", 1]);
    expect(await script.exec(["k"], ["b"])).toEqual(["k", "b", 2]);
    await client.scriptFlush();
    bridge.resetCounters();
    seen.length = 0;
    expect(await script.exec(["k"], ["bar"])).toEqual(["k", "bar", 3]);
    expect(bridge.requests).toEqual({ total: 2, byPath: { "/pipeline": 2 } });
    expect(seen.map((r) => (r.body as string[][])[0]?.[0])).toEqual(["evalsha", "eval"]);
  });

  it("SCRIPT LOAD, SCRIPT EXISTS and EVALSHA are ordinary commands over / and /pipeline", async () => {
    for (const client of [defaultClient(), plainClient()]) {
      await admin.call("SCRIPT", "FLUSH");
      const sha = await client.scriptLoad("return {'OK', 'abcd', 7}");
      expect(sha).toMatch(/^[0-9a-f]{40}$/);
      expect(await raw("SCRIPT", "EXISTS", sha)).toEqual([1]);
      expect(await client.scriptExists(sha, "0".repeat(40))).toEqual([1, 0]);
      expect(await client.evalsha(sha, [], [])).toEqual(["OK", "abcd", 7]);
    }
  });

  it("script.evalsha() does not fall back either", async () => {
    const script = plainClient().createScript("return 1");
    await expect(script.evalsha([], [])).rejects.toThrow(/NOSCRIPT/);
    expect(bridge.requests).toEqual({ total: 1, byPath: { "/": 1 } });
  });

  it("plain evalsha does not fall back: NOSCRIPT reaches the caller", async () => {
    const sha = String(await raw("SCRIPT", "LOAD", "return 1"));
    await admin.call("SCRIPT", "FLUSH");
    await expect(plainClient().evalsha(sha, [], [])).rejects.toThrow(/NOSCRIPT/);
    await expect(defaultClient().evalsha(sha, [], [])).rejects.toThrow(/NOSCRIPT/);
    expect(bridge.requests.total).toBe(2);
  });
});

describe("authentication", () => {
  it("rejects a wrong token with 401 on /, /pipeline and /multi-exec, running nothing", async () => {
    const bad = { url: bridge.url, token: "wrong", retry: { retries: 0 } } as const;
    await expect(new Redis({ ...bad, enableAutoPipelining: false }).set("a", "1")).rejects.toThrow(/^Unauthorized/);
    await expect(new Redis(bad).set("b", "1")).rejects.toThrow(/^Unauthorized/);
    await expect(new Redis(bad).pipeline().set("c", "1").exec()).rejects.toThrow(/^Unauthorized/);
    await expect(new Redis(bad).multi().set("d", "1").exec()).rejects.toThrow(/^Unauthorized/);
    expect(bridge.requests).toEqual({ total: 4, byPath: { "/": 1, "/pipeline": 2, "/multi-exec": 1 } });
    expect(seen).toEqual([]);
    expect(await raw("DBSIZE")).toBe(0);
  });

  it("rejects the right token followed by anything else (the whole credential must match)", async () => {
    const extended = { url: bridge.url, token: `${bridge.token} extra`, retry: { retries: 0 } } as const;
    await expect(new Redis({ ...extended, enableAutoPipelining: false }).set("a", "1")).rejects.toThrow(/^Unauthorized/);
    await expect(new Redis(extended).set("b", "1")).rejects.toThrow(/^Unauthorized/);
    await expect(new Redis(extended).multi().set("c", "1").exec()).rejects.toThrow(/^Unauthorized/);
    expect(seen).toEqual([]);
    expect(await raw("DBSIZE")).toBe(0);
  });
});

describe("connection state never leaks between requests", () => {
  it("SELECT, MULTI and CLIENT SETNAME sent to / do not poison the pooled connection", async () => {
    const client = defaultClient();
    await client.set("k", "db0");
    // exec() is excluded from auto-pipelining: these go to / one by one.
    expect(await client.exec(["select", "1"])).toBe("OK");
    for (let i = 0; i < 3; i++) expect(await client.get("k")).toBe("db0");
    expect(await client.exec(["multi"])).toBe("OK");
    expect(await client.get("k")).toBe("db0"); // not "QUEUED"
    expect(await client.exec(["client", "setname", "poisoned"])).toBe("OK");
    expect(await client.exec(["client", "getname"])).toBeNull();
    // A WATCHed connection reused for a transaction would abort it once the key changes.
    expect(await client.exec(["watch", "k"])).toBe("OK");
    await admin.call("SET", "k", "changed");
    expect(await client.multi().set("k", "db0-again").exec()).toEqual(["OK"]);
    expect(await raw("GET", "k")).toBe("db0-again");
    expect(bridge.pool.discarded).toBeGreaterThanOrEqual(5);
  });
});

describe("large bodies and keep-alive", () => {
  it("round-trips a 300 KB multi-byte value and a 1000-command pipeline of 300 KB", async () => {
    const client = defaultClient();
    const big = "🌊é日".repeat(35_000); // ~315 KB of UTF-8
    expect(await client.set("big", big)).toBe("OK");
    expect(await client.get("big")).toBe(big);
    expect(await raw("STRLEN", "big")).toBe(Buffer.byteLength(big));
    const p = client.pipeline();
    for (let i = 0; i < 1000; i++) p.set(`row:${i}`, "x".repeat(300));
    expect(await p.exec()).toHaveLength(1000);
    expect(JSON.stringify(seen.at(-1)?.body).length).toBeGreaterThan(300_000);
    expect(await raw("DBSIZE")).toBe(1001);
  });

  it("reuses one HTTP connection for sequential requests", async () => {
    const client = plainClient();
    await client.set("warm", "1");
    const before = bridge.httpConnections;
    for (let i = 0; i < 30; i++) await client.get("warm");
    expect(bridge.requests.byPath["/"]).toBe(31);
    expect(bridge.httpConnections - before).toBeLessThanOrEqual(1);
  });
});

describe("client options the document describes", () => {
  afterEach(() => {
    vi.unstubAllEnvs();
  });

  it("a per-request deadline (signal: () => AbortSignal.timeout) rejects; the bridge retires the blocked connection", async () => {
    const client = plainClient({ signal: () => AbortSignal.timeout(200), retry: { retries: 0 } });
    const discarded = bridge.pool.discarded;
    await expect(client.exec(["blpop", "q", "0"])).rejects.toThrow(/abort|timeout/i);
    await vi.waitFor(() => expect(bridge.pool.discarded).toBe(discarded + 1), { timeout: 5000, interval: 10 });
    await vi.waitFor(async () => expect(String(await raw("INFO", "clients"))).toMatch(/blocked_clients:0\b/), {
      timeout: 5000,
      interval: 10,
    });
    // No BLPOP is left behind to swallow the next push.
    expect(await plainClient().rpush("q", "job")).toBe(1);
    expect(await raw("LRANGE", "q", "0", "-1")).toEqual(["job"]);
  });

  it("works with a localhost URL and with Redis.fromEnv() (UPSTASH_REDIS_REST_*, then KV_REST_API_*)", async () => {
    const localhost = bridge.url.replace("127.0.0.1", "localhost");
    expect(localhost).toMatch(/^http:\/\/localhost:\d+$/);
    expect(await new Redis({ url: localhost, token: bridge.token }).set("k", "bar")).toBe("OK");
    vi.stubEnv("UPSTASH_REDIS_REST_URL", localhost);
    vi.stubEnv("UPSTASH_REDIS_REST_TOKEN", bridge.token);
    vi.stubEnv("KV_REST_API_URL", "http://127.0.0.1:9");
    vi.stubEnv("KV_REST_API_TOKEN", "wrong");
    expect(await Redis.fromEnv().get("k")).toBe("bar");
    vi.stubEnv("UPSTASH_REDIS_REST_URL", "");
    vi.stubEnv("UPSTASH_REDIS_REST_TOKEN", "");
    vi.stubEnv("KV_REST_API_URL", bridge.url);
    vi.stubEnv("KV_REST_API_TOKEN", bridge.token);
    expect(await Redis.fromEnv().get("k")).toBe("bar");
  });

  it("an HTTP error status is never retried, even with the default retry settings: one request each", async () => {
    await admin.call("SET", "s", "x");
    await expect(new Redis({ url: bridge.url, token: "wrong" }).get("k")).rejects.toThrow(/^Unauthorized/);
    await expect(defaultClient().lrange("s", 0, -1)).rejects.toThrow(/^WRONGTYPE/);
    await expect(defaultClient().multi().set("x", "1").hset("h", {}).exec()).rejects.toThrow(/^EXECABORT/);
    expect(bridge.requests).toEqual({ total: 3, byPath: { "/pipeline": 1, "/": 1, "/multi-exec": 1 } });

    const own = await startRedis();
    const front = await startUpstashBridge({ redis: { host: own.host, port: own.port } });
    try {
      await own.stop();
      await expect(new Redis({ url: front.url, token: front.token }).get("k")).rejects.toThrow(/redis unreachable/);
      expect(front.requests).toEqual({ total: 1, byPath: { "/pipeline": 1 } });
    } finally {
      await front.stop();
      await own.stop();
    }
  });
});

describe("path prefix", () => {
  it("serves /, /pipeline and /multi-exec under the prefix", async () => {
    const prefixed = await startUpstashBridge({ redis: { host: redis.host, port: redis.port }, pathPrefix: "/upstash/v1/" });
    try {
      expect(prefixed.url).toMatch(/\/upstash\/v1$/);
      const plain = new Redis({ url: prefixed.url, token: prefixed.token, enableAutoPipelining: false });
      const auto = new Redis({ url: prefixed.url, token: prefixed.token });
      expect(await plain.set("k", "bar")).toBe("OK");
      expect(await auto.get("k")).toBe("bar");
      expect(await auto.multi().get("k").exec()).toEqual(["bar"]);
      expect(prefixed.requests).toEqual({ total: 3, byPath: { "/": 1, "/pipeline": 1, "/multi-exec": 1 } });
    } finally {
      await prefixed.stop();
    }
  });
});

describe("unreachable bridge or Redis", () => {
  it("connection refused: the client throws (one attempt with retries: 0)", async () => {
    const gone = await startUpstashBridge({ redis: { host: redis.host, port: redis.port } });
    const { url, token } = gone;
    await gone.stop();
    for (
      const client of [
        new Redis({ url, token, retry: { retries: 0 } }),
        new Redis({ url, token, retry: { retries: 0 }, enableAutoPipelining: false }),
      ]
    ) {
      const error = await client.get("k").then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(TypeError);
      expect((error as { cause?: { code?: string } }).cause?.code).toBe("ECONNREFUSED");
    }
  });

  it("Redis down behind a live bridge: a JSON 5xx the client reports; recovers after restart", async () => {
    const own = await startRedis();
    const front = await startUpstashBridge({ redis: { host: own.host, port: own.port } });
    try {
      const client = new Redis({ url: front.url, token: front.token, retry: { retries: 0 } });
      expect(await client.set("k", "abcd")).toBe("OK");
      own.kill("SIGKILL");
      await own.exited();
      await expect(client.get("k")).rejects.toThrow(/redis (unreachable|connection lost)/);
      await own.restart();
      expect(await client.get("k")).toBeNull(); // nothing persisted
      expect(await client.set("k", "bar")).toBe("OK");
      expect(await client.get("k")).toBe("bar");
    } finally {
      await front.stop();
      await own.stop();
    }
  });
});
