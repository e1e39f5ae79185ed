// A deliberate search for identities that share a counter when they must not (and for client
// addresses that must share one but might not), through the HTTP layer's decision path into the
// memory store and into Redis. Asserted by counting: exhaust one identity's limit, then the other
// must still be admitted (or, for spellings of one client, denied).
import { fixedWindow, memoryStore, type RateLimitStore, redisStore } from "@floodgate/core";
import { createHttpRateLimiter, type HttpRateLimitOptions, type RequestAccess } from "@floodgate/core/http";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RedisInstance, startRedis } from "../support/redis-server.ts";

/** A request as the fake access reads it: no framework, no socket. */
interface FakeRequest {
  method: string;
  path: string;
  peer: string;
  key?: string;
}
const ACCESS: RequestAccess<FakeRequest> = {
  method: (r) => r.method,
  path: (r) => r.path,
  header: (r, name) => (name === "x-key" ? r.key : undefined),
};

const LIMIT = 2;
const policy = fixedWindow({ limit: LIMIT, window: "1h" });
const NOW = 1_700_000_000_000;
let prefixes = 0;

function middleware(store: RateLimitStore, extra: Partial<HttpRateLimitOptions<FakeRequest>> = {}) {
  return createHttpRateLimiter<FakeRequest>({
    store,
    // A fresh namespace per case, so cases never meet each other's state in a shared store.
    prefix: `c${prefixes++}:`,
    clock: () => NOW,
    warnings: false,
    key: (req) => req.header("x-key"),
    rules: {
      "GET /api": policy,
      "GET /api/:id": policy,
      "/files/*": policy,
      default: policy,
    },
    ...extra,
  }, ACCESS);
}

const request = (r: Partial<FakeRequest>): FakeRequest => ({ method: "GET", path: "/api", peer: "203.0.113.1", ...r });

/** Spends `a`'s whole limit (and checks that it is spent), then tells whether `b` is still admitted. */
async function admittedAfterExhausting(http: ReturnType<typeof middleware>, a: FakeRequest, b: FakeRequest): Promise<boolean> {
  for (let i = 0; i < LIMIT; i++) expect((await http.decideRequest(a, a.peer))!.allowed).toBe(true);
  expect((await http.decideRequest(a, a.peer))!.allowed).toBe(false);
  return (await http.decideRequest(b, b.peer))!.allowed;
}

/** Pairs of keys a key function may return that are different identities. */
const DISTINCT_KEYS: [string, string][] = [
  ["a:b", "a"],
  ["a", "a:"],
  ["a:1", "a"], // a second policy's Redis key is `<base>:1`
  ["a}", "a"],
  ["{a}", "a"],
  ["a%7D", "a}"],
  ["a%25", "a%"],
  ["a%uD800", "a\uD800"],
  ["a\uD800", "a\uFFFD"], // UTF-8 would turn the lone surrogate into U+FFFD
  ["a\uD800", "a\uDC00"],
  ["a\uD83D\uDE00", "a\uD83D"],
  ["\u00e9", "e\u0301"], // NFC and NFD spellings: different strings, not merged silently
  ["\u212B", "\u00C5"], // ANGSTROM SIGN and its NFC form
  ["\uFB01", "fi"], // a compatibility ligature (NFKC) is not its letters
  ["A", "a"],
  ["a ", "a"],
  ["a\u0000", "a"],
  ["a\n", "a"],
  ["a*", "a"],
  ["1:2:3", "1:2"],
  ["x".repeat(1001), "x".repeat(1000)],
  ["x".repeat(990) + "a".repeat(20), "x".repeat(990) + "b".repeat(20)], // shortened keys keep a digest of the whole
];

/** Pairs across the rules' namespaces: a key that spells another rule's prefix is not that rule's key. */
const DISTINCT_ACROSS_RULES: [string, Partial<FakeRequest>, Partial<FakeRequest>][] = [
  ["`1:k` under GET /api vs `k` under GET /api/:id", { path: "/api", key: "1:k" }, { path: "/api/1", key: "k" }],
  ["`GET /api:k` under default vs `k` under GET /api", { path: "/other", key: "GET /api:k" }, { path: "/api", key: "k" }],
  ["`default:k` under GET /api vs `k` under default", { path: "/api", key: "default:k" }, { path: "/other", key: "k" }],
  ["`k` under GET /api vs `k` under /files/*", { path: "/api", key: "k" }, { path: "/files/x", key: "k" }],
  ["`{GET /api}k` under default vs `k` under GET /api", { path: "/other", key: "{GET /api}k" }, { path: "/api", key: "k" }],
  ["`}k` under default vs `k` under GET /api", { path: "/other", key: "}k" }, { path: "/api", key: "k" }],
];

/** Client addresses (no key function answer: the IP decides) that are one client, IPv6 grouped by /64. */
const SAME_CLIENT: [string, string][] = [
  ["2001:db8:1:2::1", "2001:db8:1:2:ffff:ffff:ffff:ffff"],
  ["2001:db8:1:2::1", "2001:0db8:0001:0002:0000:0000:0000:0001"],
  ["2001:DB8:1:2::A", "2001:db8:1:2::a"],
  ["2001:db8:1:2::1", "[2001:db8:1:2::1]"],
  ["2001:db8:1:2::1", "[2001:db8:1:2::1]:443"],
  ["fe80::1%eth0", "fe80::1%eth1"],
  ["2001:db8:1:2:0:0:0:1", "2001:db8:1:2::0:1"],
  ["1.2.3.4", "::ffff:1.2.3.4"],
  ["1.2.3.4", "::FFFF:1.2.3.4"],
  ["1.2.3.4", "::ffff:102:304"],
  ["1.2.3.4", "64:ff9b::1.2.3.4"],
  ["1.2.3.4", "::ffff:0:1.2.3.4"],
  ["1.2.3.4", "1.2.3.4:8080"],
  ["1.2.3.4", " 1.2.3.4 "],
];

/** Client addresses that are different clients. */
const DIFFERENT_CLIENTS: [string, string][] = [
  ["2001:db8:1:2::1", "2001:db8:1:3::1"],
  ["2001:db8:1:2::1", "2001:db8:1:102::1"],
  ["2001:db8::1", "2001:db9::1"],
  ["1.2.3.4", "1.2.3.5"],
  ["1.2.3.4", "::ffff:1.2.3.5"],
  ["::1", "0.0.0.1"], // IPv6 loopback is not an IPv4 address
  ["::", "0.0.0.0"],
  ["1.2.3.4", "2001:db8::102:304"], // an IPv4 value in the low bits of an ordinary IPv6 address
  ["10.0.0.1", "1.0.0.01"], // not 10.0.0.1 parsed loosely: a malformed address is no client at all
];

/**
 * Two keys of more than 1000 characters that the HTTP layer's shortening of long keys would give
 * the same text if its digest were 32-bit FNV-1a: found by a birthday search over suffixes of one
 * shared head (a few hundred thousand tries, well under a second).
 */
let collision: [string, string] | undefined;
function fnvCollision(): [string, string] {
  return collision ??= searchFnvCollision();
}

function searchFnvCollision(): [string, string] {
  const head = "k".repeat(990);
  let base = 0x811c9dc5;
  for (let i = 0; i < head.length; i++) base = Math.imul(base ^ head.charCodeAt(i), 0x01000193);
  const seen = new Map<number, string>();
  for (let n = 0; n < 4_000_000; n++) {
    const tail = n.toString(36).padStart(16, "0");
    let h = base;
    for (let i = 0; i < tail.length; i++) h = Math.imul(h ^ tail.charCodeAt(i), 0x01000193);
    const digest = h >>> 0;
    const other = seen.get(digest);
    if (other !== undefined) return [head + other, head + tail];
    seen.set(digest, tail);
  }
  throw new Error("no FNV-1a collision found");
}

const stores: [string, () => Promise<{ store: RateLimitStore; close(): Promise<void> }>][] = [
  ["memory store", () => Promise.resolve({ store: memoryStore(), close: () => Promise.resolve() })],
  ["redisStore (ioredis)", async () => {
    const redis: RedisInstance = await startRedis();
    const client = new Redis(redis.port, redis.host, { maxRetriesPerRequest: 1 });
    return {
      store: redisStore({ client }),
      close: async () => {
        client.disconnect();
        await redis.stop();
      },
    };
  }],
];

describe.each(stores)("%s: no shared counter between distinct identities", (_name, open) => {
  let store: RateLimitStore;
  let close: () => Promise<void>;
  beforeAll(async () => ({ store, close } = await open()));
  afterAll(() => close());

  it.each(DISTINCT_KEYS)("key %j does not share a counter with %j", async (a, b) => {
    const http = middleware(store);
    expect(await admittedAfterExhausting(http, request({ key: a }), request({ key: b }))).toBe(true);
    // And the other way round, on a fresh namespace.
    expect(await admittedAfterExhausting(middleware(store), request({ key: b }), request({ key: a }))).toBe(true);
  });

  it.each(DISTINCT_ACROSS_RULES)("%s", async (_what, a, b) => {
    expect(await admittedAfterExhausting(middleware(store), request(a), request(b))).toBe(true);
    expect(await admittedAfterExhausting(middleware(store), request(b), request(a))).toBe(true);
  });

  it.each(SAME_CLIENT)("client %j and client %j are one client (IPv6 by /64)", async (a, b) => {
    expect(await admittedAfterExhausting(middleware(store), request({ peer: a }), request({ peer: b }))).toBe(false);
    expect(await admittedAfterExhausting(middleware(store), request({ peer: b }), request({ peer: a }))).toBe(false);
  });

  it.each(DIFFERENT_CLIENTS)("client %j and client %j are different clients", async (a, b) => {
    const http = middleware(store);
    const first = await http.decideRequest(request({ peer: a }), a);
    const second = await http.decideRequest(request({ peer: b }), b);
    // An address that does not parse has no client key of its own ("unknown"): it can share with no real client.
    if (first!.info.key === "unknown" || second!.info.key === "unknown") {
      expect(first!.info.key).not.toBe(second!.info.key);
      return;
    }
    expect(await admittedAfterExhausting(middleware(store), request({ peer: a }), request({ peer: b }))).toBe(true);
    expect(await admittedAfterExhausting(middleware(store), request({ peer: b }), request({ peer: a }))).toBe(true);
  });

  it("with ipv6Subnet: 128, two addresses of one /64 are different clients", async () => {
    const http = middleware(store, { ipv6Subnet: 128 });
    expect(await admittedAfterExhausting(http, request({ peer: "2001:db8:1:2::1" }), request({ peer: "2001:db8:1:2::2" }))).toBe(true);
  });

  // Two long keys an attacker chose to collide under a 32-bit FNV-1a digest (what shortened long
  // keys used to carry): with SHA-256 of the whole key they count apart.
  it("two long keys chosen to collide under a 32-bit digest do not share a counter", async () => {
    const [a, b] = fnvCollision();
    expect(a).not.toBe(b);
    expect(await admittedAfterExhausting(middleware(store), request({ key: a }), request({ key: b }))).toBe(true);
  });
});
