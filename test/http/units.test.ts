// Unit tests of the HTTP layer's pure parts: addresses, ranges, grouping, proxy chains, rules,
// option validation and warnings.
import {
  fixedWindow,
  FloodgateError,
  type HttpRateLimitOptions,
  memoryStore,
  type RateLimitInfo,
  TRUST_PROXY_RANGES,
  withRateLimit,
} from "@floodgate/core";
import { formatIp, groupIp, inRange, normalizeIp, parseForwarded, parseIp, parseRange, targetPath } from "@floodgate/core/http";
import { compareSpecificity, compilePattern, matchesPattern, normalizePath } from "../../packages/core/src/http/routes.ts";
import { policyFingerprint, ruleSlug } from "../../packages/core/src/http/namespace.ts";
import { rateLimit as honoRateLimit } from "@floodgate/hono";
import { describe, expect, it } from "vitest";
import fc from "fast-check";

describe("IP addresses", () => {
  it.each([
    ["1.2.3.4", "1.2.3.4"],
    [" 1.2.3.4:8080", "1.2.3.4"],
    ["::ffff:127.0.0.1", "127.0.0.1"],
    ["::FFFF:7f00:1", "127.0.0.1"],
    ["[::1]:443", "::1"],
    ["2001:DB8:0:0:0:0:0:1", "2001:db8::1"],
    ["2001:db8::0:1", "2001:db8::1"],
    ["fe80::1%eth0", "fe80::1"],
    ["[fe80::1%25en0]:80", "fe80::1"],
    ["2001:db8:0:0:1:0:0:1", "2001:db8::1:0:0:1"],
    ["0:0:0:0:0:0:0:0", "::"],
    // IPv4 embedded in IPv6 is that IPv4 address, whichever way it is spelled.
    ["::1.2.3.4", "1.2.3.4"],
    ["::102:304", "1.2.3.4"],
    ["64:ff9b::192.0.2.33", "192.0.2.33"],
    ["64:FF9B:0:0:0:0:C000:221", "192.0.2.33"],
    ["[64:ff9b::c000:221]:443", "192.0.2.33"],
    ["::ffff:0:192.0.2.33", "192.0.2.33"],
    ["0:0:0:0:ffff:0:c000:221", "192.0.2.33"],
    ["::0.1.0.0", "0.1.0.0"],
    // IPv6's own addresses, and those that only look alike, stay IPv6.
    ["::", "::"],
    ["::1", "::1"],
    ["::0.0.0.1", "::1"],
    ["::0.0.255.255", "::ffff"],
    ["64:ff9b:1::c000:221", "64:ff9b:1::c000:221"],
    ["64:ff9b::1:0:c000:221", "64:ff9b::1:0:c000:221"],
    ["::ffff:1:c000:221", "::ffff:1:c000:221"],
    ["1::c000:221", "1::c000:221"],
    ["::1:0:c000:221", "::1:0:c000:221"],
    ["1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8"],
    ["::ffff:255.255.255.255", "255.255.255.255"],
    ["0.0.0.0", "0.0.0.0"],
  ])("%s → %s", (input, expected) => {
    expect(normalizeIp(input)).toBe(expected);
  });

  it("reads dotted quads exactly as the textbook pattern does (no leading zeros, octets <= 255)", () => {
    const pattern = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/;
    const reference = (text: string): string | undefined => {
      const m = pattern.exec(text);
      if (m === null || m.slice(1).some((p) => (p.length > 1 && p[0] === "0") || +p > 255)) return undefined;
      return m.slice(1).map(Number).join(".");
    };
    const part = fc.oneof(
      fc.integer({ min: 0, max: 999 }).map(String),
      fc.stringMatching(/^[0-9]{0,4}$/),
      fc.constantFrom("", "-1", "1a", " 1"),
    );
    fc.assert(
      fc.property(fc.array(part, { minLength: 1, maxLength: 6 }), (parts) => {
        const text = parts.join(".");
        const parsed = parseIp(text);
        expect(parsed === undefined ? undefined : formatIp(parsed)).toBe(reference(text.trim()));
      }),
      { numRuns: 2000 },
    );
  });

  it.each([
    "",
    "unknown",
    "1.2.3",
    "1.2.3.256",
    "01.2.3.4",
    "1.2.3.4.5",
    "::1::2",
    "1:2:3:4:5:6:7:8:9",
    "12345::",
    "_hidden",
    "g::1",
    "1.2.3.4/24",
    "1.2.3.4.",
    ".1.2.3",
    "1..2.3",
    "1.2.3.1000",
    "1.2.3.-1",
    "::ffff:01.2.3.4",
    "\uff11.2.3.4",
  ])(
    "rejects %j",
    (input) => {
      expect(parseIp(input)).toBeUndefined();
    },
  );

  it("every IPv6 form of an IPv4 address keys as that address; two IPv4 addresses never share a key", () => {
    const hex = (n: number) => `${(n >>> 16).toString(16)}:${(n & 0xffff).toString(16)}`;
    const dotted = (n: number) => `${n >>> 24}.${(n >>> 16) & 255}.${(n >>> 8) & 255}.${n & 255}`;
    const forms = (n: number): string[] => [
      `::ffff:${dotted(n)}`,
      `::ffff:${hex(n)}`,
      `64:ff9b::${dotted(n)}`,
      `64:ff9b::${hex(n)}`,
      `::ffff:0:${dotted(n)}`,
      `::ffff:0:${hex(n)}`,
      // IPv4-compatible only from 0.1.0.0 up: below, `::x` is IPv6's own (`::`, `::1`).
      ...(n >= 65536 ? [`::${dotted(n)}`, `::${hex(n)}`] : []),
    ];
    const key = (text: string) => groupIp(parseIp(text)!, 64);
    const address = fc.integer({ min: 0, max: 2 ** 32 - 1 });
    fc.assert(
      fc.property(address, address, (a, b) => {
        for (const form of forms(a)) expect(key(form)).toBe(dotted(a));
        if (a !== b) { for (const x of forms(a)) for (const y of forms(b)) expect(key(x)).not.toBe(key(y)); }
      }),
      { numRuns: 500 },
    );
  });

  it("groups IPv6 by prefix length, IPv4 as is", () => {
    expect(groupIp(parseIp("2001:db8:aaaa:bbbb:cccc::1")!, 64)).toBe("2001:db8:aaaa:bbbb::/64");
    expect(groupIp(parseIp("2001:db8:aaaa:bbff::1")!, 56)).toBe("2001:db8:aaaa:bb00::/56");
    expect(groupIp(parseIp("2001:db8::1")!, 128)).toBe("2001:db8::1");
    expect(groupIp(parseIp("203.0.113.9")!, 64)).toBe("203.0.113.9");
    expect(formatIp(parseIp("::ffff:10.0.0.1")!)).toBe("10.0.0.1");
  });

  it("matches CIDR ranges", () => {
    const v4 = parseRange("10.0.0.0/8")!;
    expect(inRange(parseIp("10.255.0.1")!, v4)).toBe(true);
    expect(inRange(parseIp("11.0.0.1")!, v4)).toBe(false);
    expect(inRange(parseIp("::ffff:10.1.1.1")!, v4)).toBe(true);
    const v6 = parseRange("2001:db8::/32")!;
    expect(inRange(parseIp("2001:db8:ffff::1")!, v6)).toBe(true);
    expect(inRange(parseIp("2001:db9::1")!, v6)).toBe(false);
    expect(inRange(parseIp("10.0.0.1")!, v6)).toBe(false);
    expect(inRange(parseIp("192.0.2.7")!, parseRange("192.0.2.7")!)).toBe(true);
    expect(inRange(parseIp("192.0.2.8")!, parseRange("192.0.2.7")!)).toBe(false);
    expect(inRange(parseIp("0.1.2.3")!, parseRange("0.0.0.0/0")!)).toBe(true);
    expect(inRange(parseIp("10.0.0.1")!, parseRange("::ffff:10.0.0.0/104")!)).toBe(true);
    // A range written over IPv4-embedding IPv6 is the IPv4 range; a wider one stays IPv6.
    const nat64 = parseRange("64:ff9b::192.0.2.0/120")!;
    expect(inRange(parseIp("192.0.2.9")!, nat64)).toBe(true);
    expect(inRange(parseIp("64:ff9b::c000:2ff")!, nat64)).toBe(true);
    expect(inRange(parseIp("192.0.3.1")!, nat64)).toBe(false);
    const wide = parseRange("64:ff9b::/64")!;
    expect(wide.v).toBe(6);
    expect(inRange(parseIp("64:ff9b::1:0:0:1")!, wide)).toBe(true);
    expect(inRange(parseIp("2001:db8:0:1::1")!, parseRange("2001:db8::/63")!)).toBe(true);
    expect(inRange(parseIp("2001:db8:0:2::1")!, parseRange("2001:db8::/63")!)).toBe(false);
    expect(inRange(parseIp("2001:db8::1")!, parseRange("::/0")!)).toBe(true);
    expect(parseRange("10.0.0.0/33")).toBeUndefined();
    expect(parseRange("10.0.0.0/x")).toBeUndefined();
  });

  it("reads Forwarded for= values", () => {
    expect(parseForwarded('for=192.0.2.43, for="[2001:db8:cafe::17]:4711";proto=https, by=1.1.1.1;for=unknown')).toEqual([
      "192.0.2.43",
      "[2001:db8:cafe::17]:4711",
      "unknown",
    ]);
  });
});

describe("targetPath (the path of a raw request-target, as Express and Koa route it)", () => {
  it.each([
    ["/a/b", "/a/b"],
    ["/a?q=1", "/a"],
    ["/a#x", "/a"],
    ["/a#x?y", "/a"],
    ["/a?y#x", "/a"],
    ["/a?x=http://b/c", "/a"],
    ["http://host/login", "/login"],
    ["HTTPS://host:8443/login?x#y", "/login"],
    ["http://host?x", ""],
    ["*", "*"],
  ])("%s -> %s", (target, path) => {
    expect(targetPath(target)).toBe(path);
  });
});

describe("rules", () => {
  const match = (pattern: string, method: string, path: string) =>
    matchesPattern(compilePattern(pattern, false), method, normalizePath(path, false));

  it.each([
    ["GET /api/search", "GET", "/api/search", true],
    ["GET /api/search", "POST", "/api/search", false],
    ["GET /api/search", "GET", "/api/search/more", false],
    ["/api/search", "DELETE", "/api/search", true],
    ["* /api/*", "GET", "/api", true],
    ["* /api/*", "GET", "/api/a/b/c", true],
    ["GET /api/*/x", "GET", "/api/a/x", true],
    ["GET /api/*/x", "GET", "/api/a/b/x", false],
    ["POST /orders/:id", "POST", "/orders/42", true],
    ["POST /orders/:id", "POST", "/orders/", false],
    ["POST /orders/:id/items", "POST", "/orders/42/items?x=1", true],
    ["GET /", "GET", "/", true],
    ["GET /a.b", "GET", "/aXb", false],
    ["GET /login", "GET", "//login/", true],
    ["GET /login", "GET", "/%6Cogin", true],
  ])("%s vs %s %s → %s", (pattern, method, path, expected) => {
    expect(match(pattern, method, path)).toBe(expected);
  });

  it("orders by specificity: literal > :param > * > trailing *, method beats any", () => {
    const sources = ["/api/*", "GET /api/:id", "GET /api/*/x", "GET /api/search", "/api/search", "* /*"];
    const sorted = sources.map((s) => compilePattern(s, false)).sort(compareSpecificity).map((p) => p.source);
    expect(sorted).toEqual(["GET /api/search", "/api/search", "GET /api/:id", "GET /api/*/x", "/api/*", "* /*"]);
  });

  it("an exact path beats a trailing * that also matches it (the * then matches nothing)", () => {
    const first = (sources: string[], method: string, path: string) =>
      sources.map((s) => compilePattern(s, false)).sort(compareSpecificity)
        .find((p) => matchesPattern(p, method, normalizePath(path, false)))?.source;
    expect(first(["/api/*", "/api"], "GET", "/api")).toBe("/api");
    expect(first(["/api", "/api/*"], "GET", "/api")).toBe("/api");
    expect(first(["GET /orders/:id/*", "GET /orders/:id"], "GET", "/orders/7")).toBe("GET /orders/:id");
    expect(first(["* /*", "/"], "GET", "/")).toBe("/");
    // Path first, then method: an exact any-method path beats a wildcard with a method.
    expect(first(["GET /api/*", "/api"], "GET", "/api")).toBe("/api");
    // The trailing * still wins where it is the only match, and loses to a longer literal.
    expect(first(["/api/*", "/api"], "GET", "/api/x")).toBe("/api/*");
    expect(first(["/api/*", "/api/x"], "GET", "/api/x")).toBe("/api/x");
  });

  it("rejects malformed patterns", () => {
    expect(() => compilePattern("GET api", false)).toThrow(/must start with \//);
    expect(() => compilePattern("G-T /a", false)).toThrow(/method/);
    expect(() => compilePattern("GET /a*b", false)).toThrow(/segment/);
  });
});

describe("option validation", () => {
  const ok = (r: Request) => new Response(r.url);
  const build = (options: unknown) => () => withRateLimit(ok, options as HttpRateLimitOptions<Request>);
  const policy = fixedWindow({ limit: 1, window: "1m" });

  it.each([
    [{ policy, trustProxy: "cloudflar" }, /`trustProxy`: received "cloudflar"; expected false, true, a hop count.*"cloudflare"/],
    [{ policy, trustProxy: ["10.0.0.0/8", "nope"] }, /`trustProxy.1`: received "nope"/],
    [
      { policy, trustProxy: { preset: "cloudflare", ranges: ["173.245.48.0/20", "nope"] } },
      /`trustProxy.ranges.1`: received "nope"; expected .*or \{ preset, ranges \} with one of those presets and a non-empty array of the proxies' IPs\/CIDR ranges\./,
    ],
    [{ policy, trustProxy: { preset: "cloudflare", ranges: ["10.0.0.0/33"] } }, /`trustProxy.ranges.0`: received "10.0.0.0\/33"/],
    [
      { policy, trustProxy: { preset: "cloudflare", ranges: [] } },
      /`trustProxy.ranges`: received an array of 0; expected .*a non-empty array/,
    ],
    [{ policy, trustProxy: { preset: "cloudflare", ranges: "10.0.0.0/8" } }, /`trustProxy.ranges`: received "10.0.0.0\/8"/],
    [{ policy, trustProxy: { ranges: ["10.0.0.0/8"] } }, /`trustProxy.preset`: received undefined; expected .*"cloudflare"/],
    [{ policy, trustProxy: { preset: "cloudflar" } }, /`trustProxy.preset`: received "cloudflar"/],
    [{ policy, trustProxy: { preset: "cloudflare", range: ["10.0.0.0/8"] } }, /`trustProxy.range`: received an array of 1/],
    [{ policy, headers: "draft-8" }, /`headers`: received "draft-8"; expected true, false, or one or several of "legacy"/],
    [{ policy, headers: ["draft-7", "draft-11"] }, /"draft-7" and "draft-11" both write/],
    [{ policy, statusCode: 200 }, /`statusCode`: received 200; expected an HTTP status from 400 to 599/],
    [{ policy, onStoreError: "ignore" }, /`onStoreError`: received "ignore"; expected "allow", "deny", "fallback"/],
    [{ policy, timeoutMs: 0 }, /`timeoutMs`: received 0/],
    [{ policy, ipv6Subnet: 129 }, /`ipv6Subnet`: received 129; expected a prefix length from 1 to 128/],
    [{ policy, trustProxyy: 1 }, /unknown option `trustProxyy` \(did you mean `trustProxy`\?\)/],
    [{ policy, rules: { "GET api": policy } }, /invalid rule "GET api"/],
    [
      { policy, rules: { "GET /users/{id}": policy } },
      /`rules`: invalid rule "GET \/users\/\{id\}": segment "\{id\}" is invalid; expected "METHOD \/path" \(or "\/path" for any method\) where a segment is literal text \(without \*, :, \{ or \}\), ":name" or "\*"/,
    ],
    [{ policy, rules: { "GET /a": { cost: 2 } } }, /`rules.GET \/a`/],
    [{ policy, warnings: { nope: false } }, /`warnings.nope`/],
    [
      { policy, warnings: { trustProxyTrue: "no" } },
      /`warnings.trustProxyTrue`: received "no"; expected a boolean, or an object mapping warning codes \(forwardedHeaderIgnored/,
    ],
    [{ policy, headers: ["legacy", "x"] }, /`headers.1`: received "x"; expected true, false, or one or several of "legacy"/],
    [
      { policy, rules: { "GET /a": { policy, cost: -1 } } },
      /`rules.GET \/a.cost`: received -1; expected an object mapping "METHOD \/path"/,
    ],
    [{ policy, circuitBreaker: { fails: 1 } }, /`circuitBreaker.fails`: received 1; expected false or \{ failures\?/],
    // An address with a bad prefix length is a mistake, not a key (which would never match).
    [
      { policy, allowList: ["10.0.0.1", "1.2.3.4/33"] },
      /`allowList.1`: received "1.2.3.4\/33"; expected an array of IP addresses, CIDR ranges or keys/,
    ],
    [{ policy, allowList: ["10.0.0.0/8x"] }, /`allowList.0`: received "10.0.0.0\/8x"/],
    [{ policy, allowList: ["2001:db8::/129"] }, /`allowList.0`: received "2001:db8::\/129"/],
    [{ policy, allowList: ["192.168.0.0/"] }, /`allowList.0`: received "192.168.0.0\/"/],
    // Checked here, once: not a TypeError on every request.
    [{ policy, getClientIp: "x-real-ip" }, /rateLimit\(\): invalid option `getClientIp`: received "x-real-ip"; expected a function/],
    [{}, /`policy`: received undefined; expected `limiter`, `policy`/],
    ["nope", /expected an options object/],
  ])("%j", (options, message) => {
    expect(build(options)).toThrow(FloodgateError);
    expect(build(options)).toThrow(message);
  });

  it("the adapters' own function options are checked at construction, not called per request", () => {
    for (const getConnInfo of [5, "x", { remote: { address: "127.0.0.1" } }]) {
      expect(() => honoRateLimit({ policy, getConnInfo: getConnInfo as never })).toThrow(FloodgateError);
      expect(() => honoRateLimit({ policy, getConnInfo: getConnInfo as never })).toThrow(
        /rateLimit\(\): invalid option `getConnInfo`: received .*; expected a function/,
      );
    }
    expect(() => honoRateLimit({ policy, getConectInfo: () => undefined } as never)).toThrow(
      /unknown option `getConectInfo`.*accepted options: .*getConnInfo/,
    );
  });

  it.each([null, 42, {}, true])(
    "a key function returning %j is an INVALID_ARGUMENT naming the key, not a TypeError; nothing is counted",
    async (returned) => {
      let bad = true;
      const handler = withRateLimit(ok, {
        policy,
        key: () => (bad ? returned as never : "k"),
        getClientIp: () => "192.0.2.1",
        warnings: false,
      });
      const rejected = handler(new Request("http://x/"));
      await expect(rejected).rejects.toThrow(FloodgateError);
      await expect(rejected).rejects.toMatchObject({
        code: "INVALID_ARGUMENT",
        message: expect.stringMatching(/^rateLimit\(\): the `key` function returned .+; it must return a string/),
      });
      bad = false;
      expect((await handler(new Request("http://x/"))).status).toBe(200);
      expect((await handler(new Request("http://x/"))).status).toBe(429);
    },
  );

  it("allowList still takes keys, with or without a slash, beside addresses and ranges", () => {
    expect(() => withRateLimit(ok, { policy, allowList: ["10.0.0.0/8", "2001:db8::/64", "::1", "user/42", "api-key-1", "a/b/c"] })).not
      .toThrow();
  });

  it("withRateLimit checks its handler at construction, not on every request", () => {
    for (const handler of ["handler", undefined, { fetch: ok }]) {
      expect(() => withRateLimit(handler as never, { policy })).toThrow(FloodgateError);
      expect(() => withRateLimit(handler as never, { policy })).toThrow(
        /withRateLimit\(\): invalid argument `handler`: received .*; expected a function \(request, \.\.\.rest\) => Response/,
      );
    }
  });
});

describe("warnings", () => {
  const policy = fixedWindow({ limit: 5, window: "1m" });
  const recorder = () => {
    const logs: string[] = [];
    return { logs, logger: { warn: (m: string) => logs.push(m) } };
  };

  it("trustProxy: true warns at construction", () => {
    const { logs, logger } = recorder();
    withRateLimit(() => new Response(), { policy, trustProxy: true, logger });
    expect(logs).toHaveLength(1);
    expect(logs[0]).toMatch(/trustProxyTrue/);
    withRateLimit(() => new Response(), { policy, trustProxy: true, logger, warnings: { trustProxyTrue: false } });
    expect(logs).toHaveLength(1);
  });

  it("the same request counted twice by one limiter warns once", async () => {
    const { logs, logger } = recorder();
    const { createRateLimiter } = await import("@floodgate/core");
    const limiter = createRateLimiter({ policy });
    const inner = withRateLimit(() => new Response("ok"), { limiter, logger, getClientIp: () => "192.0.2.1" });
    const outer = withRateLimit(inner, { limiter, logger, getClientIp: () => "192.0.2.1" });
    await outer(new Request("http://x/"));
    await outer(new Request("http://x/"));
    expect(logs.filter((l) => l.includes("doubleCount"))).toHaveLength(1);
  });

  it("no client address warns once; warnings: false silences everything", async () => {
    const { logs, logger } = recorder();
    const handler = withRateLimit(() => new Response("ok"), { policy, logger });
    await handler(new Request("http://x/"));
    await handler(new Request("http://x/"));
    expect(logs.filter((l) => l.includes("noClientIp"))).toHaveLength(1);
    const quiet = withRateLimit(() => new Response("ok"), { policy, logger, warnings: false, trustProxy: true });
    await quiet(new Request("http://x/", { headers: { "x-forwarded-for": "nope" } }));
    expect(logs).toHaveLength(1);
  });

  it("many limiters created while serving warns once (a limiter per request)", async () => {
    const { logs, logger } = recorder();
    for (let i = 0; i < 25; i++) {
      const handler = withRateLimit(() => new Response("ok"), { policy, logger, getClientIp: () => "192.0.2.1" });
      await handler(new Request("http://x/"));
    }
    expect(logs.filter((l) => l.includes("limiterPerRequest"))).toHaveLength(1);
  });

  it("a throwing key function reaches the host as a rejection of that request only", async () => {
    const handler = withRateLimit(() => new Response("ok"), {
      policy,
      key: () => {
        throw new Error("bad key");
      },
      warnings: false,
    });
    await expect(handler(new Request("http://x/"))).rejects.toThrow("bad key");
  });
});

describe("platform presets", () => {
  const recorder = () => {
    const logs: string[] = [];
    return { logs, logger: { warn: (m: string) => logs.push(m) } };
  };
  /** A handler whose socket peer is the request's `x-test-peer` (absent: no socket address, as on Workers). */
  const serve = (options: Omit<HttpRateLimitOptions<Request>, "policy">, limit = 1) => {
    const { logs, logger } = recorder();
    const keys: string[] = [];
    const handler = withRateLimit(() => new Response("ok"), {
      policy: fixedWindow({ limit, window: "1m" }),
      logger,
      getClientIp: (r) => r.headers.get("x-test-peer") ?? undefined,
      onDecision: (info: RateLimitInfo) => {
        keys.push(info.key);
      },
      ...options,
    });
    const send = async (headers: Record<string, string>) => (await handler(new Request("http://x/", { headers }))).status;
    return { logs, keys, send };
  };

  it("ships Cloudflare's and Fastly's published ranges, every one valid", () => {
    expect(TRUST_PROXY_RANGES.cloudflare.filter((r) => !r.includes(":"))).toHaveLength(15);
    expect(TRUST_PROXY_RANGES.cloudflare.filter((r) => r.includes(":"))).toHaveLength(7);
    expect(TRUST_PROXY_RANGES.fastly.filter((r) => !r.includes(":"))).toHaveLength(19);
    expect(TRUST_PROXY_RANGES.fastly.filter((r) => r.includes(":"))).toHaveLength(2);
    for (const r of [...TRUST_PROXY_RANGES.cloudflare, ...TRUST_PROXY_RANGES.fastly]) expect(parseRange(r), r).toBeDefined();
  });

  it.each([["cloudflare", "cf-connecting-ip"], ["fastly", "fastly-client-ip"]] as const)(
    "%s: the header is believed from a peer inside each published range, in IPv4, IPv6 and IPv4-mapped spellings",
    async (preset, header) => {
      const { logs, keys, send } = serve({ trustProxy: preset });
      let i = 0;
      for (const range of TRUST_PROXY_RANGES[preset]) {
        const peer = range.split("/")[0]!;
        const peers = peer.includes(":") ? [peer] : [peer, `::ffff:${peer}`];
        for (const p of peers) expect(await send({ "x-test-peer": p, [header]: `203.0.113.${++i}` })).toBe(200);
      }
      expect(keys).toEqual(Array.from({ length: i }, (_, n) => `203.0.113.${n + 1}`));
      expect(logs).toEqual([]);
    },
  );

  it("a peer just outside a published range, or inside another platform's, is the client", async () => {
    const { logs, keys, send } = serve({ trustProxy: "cloudflare" });
    // 173.245.48.0/20 ends at 173.245.63.255; 151.101.0.0/16 is Fastly's.
    for (const peer of ["173.245.64.0", "173.245.47.255", "151.101.1.1", "2400:cb01::1"]) {
      await send({ "x-test-peer": peer, "cf-connecting-ip": "203.0.113.1" });
    }
    expect(keys).toEqual(["173.245.64.0", "173.245.47.255", "151.101.1.1", "2400:cb01::/64"]);
    expect(logs.filter((l) => l.includes("untrustedPresetPeer"))).toHaveLength(1);
    expect(logs[0]).toMatch(/cf-connecting-ip from 173\.245\.64\.0, outside the published cloudflare ranges/);
    expect(logs[0]).toMatch(/Make the origin reachable only through the platform/);
  });

  it("a direct client is limited by its socket address whatever CF-Connecting-IP it sends (20 forged headers, limit 2)", async () => {
    const { keys, send } = serve({ trustProxy: "cloudflare" }, 2);
    const statuses: number[] = [];
    for (let i = 0; i < 20; i++) statuses.push(await send({ "x-test-peer": "198.51.100.50", "cf-connecting-ip": `10.0.${i}.1` }));
    expect(statuses.filter((s) => s === 200)).toHaveLength(2);
    expect(new Set(keys)).toEqual(new Set(["198.51.100.50"]));
  });

  it("no socket address (the platform is the runtime, as on Workers): the header is believed, with no warning", async () => {
    const { logs, keys, send } = serve({ trustProxy: "cloudflare" });
    expect(await send({ "cf-connecting-ip": "203.0.113.1" })).toBe(200);
    expect(await send({ "cf-connecting-ip": "203.0.113.2" })).toBe(200);
    expect(await send({ "cf-connecting-ip": "203.0.113.1" })).toBe(429);
    expect(keys).toEqual(["203.0.113.1", "203.0.113.2", "203.0.113.1"]);
    expect(logs).toEqual([]);
  });

  it("a peer that is the header's own address (a runtime reporting CF-Connecting-IP as the peer) is not warned about", async () => {
    const { logs, keys, send } = serve({ trustProxy: "cloudflare" });
    await send({ "x-test-peer": "203.0.113.1", "cf-connecting-ip": "203.0.113.1" });
    await send({ "x-test-peer": "2001:db8::1", "cf-connecting-ip": "2001:DB8:0::1" });
    expect(keys).toEqual(["203.0.113.1", "2001:db8::/64"]);
    expect(logs).toEqual([]);
  });

  it("ranges given replace the published ones", async () => {
    const { logs, keys, send } = serve({ trustProxy: { preset: "cloudflare", ranges: ["10.0.0.0/8", "2001:db8::/32"] } });
    await send({ "x-test-peer": "10.1.2.3", "cf-connecting-ip": "203.0.113.1" });
    await send({ "x-test-peer": "2001:db8::7", "cf-connecting-ip": "203.0.113.2" });
    await send({ "x-test-peer": "162.158.0.1", "cf-connecting-ip": "203.0.113.3" });
    expect(keys).toEqual(["203.0.113.1", "203.0.113.2", "162.158.0.1"]);
    expect(logs).toHaveLength(1);
    expect(logs[0]).toMatch(/untrustedPresetPeer: .*\(cf-connecting-ip from 162\.158\.0\.1, outside the given ranges\)/);
  });

  it.each(
    [["vercel", "x-real-ip"], ["netlify", "x-nf-client-connection-ip"], ["fly", "fly-client-ip"], ["akamai", "true-client-ip"]] as const,
  )(
    "%s publishes no ranges: warned once at construction, the header believed from any peer; ranges given make it checked",
    async (preset, header) => {
      const loose = serve({ trustProxy: preset });
      expect(loose.logs).toHaveLength(1);
      expect(loose.logs[0]).toMatch(
        new RegExp(
          `^\\[floodgate\\] presetWithoutRanges: .*origin reachable only through the platform.*\\(trustProxy "${preset}" reads ${header}\\)$`,
        ),
      );
      await loose.send({ "x-test-peer": "198.51.100.50", [header]: "203.0.113.1" });
      await loose.send({ "x-test-peer": "198.51.100.50", [header]: "203.0.113.2" });
      expect(loose.keys).toEqual(["203.0.113.1", "203.0.113.2"]);
      expect(loose.logs).toHaveLength(1);

      expect(serve({ trustProxy: { preset }, warnings: { presetWithoutRanges: false } }).logs).toEqual([]);
      const checked = serve({ trustProxy: { preset, ranges: ["10.0.0.0/8"] } });
      expect(checked.logs).toEqual([]);
      await checked.send({ "x-test-peer": "10.0.0.1", [header]: "203.0.113.1" });
      await checked.send({ "x-test-peer": "198.51.100.50", [header]: "203.0.113.2" });
      expect(checked.keys).toEqual(["203.0.113.1", "198.51.100.50"]);
      expect(checked.logs.filter((l) => l.includes("untrustedPresetPeer"))).toHaveLength(1);
    },
  );

  it("Cloudflare and Fastly (published ranges) do not warn at construction", () => {
    expect(serve({ trustProxy: "cloudflare" }).logs).toEqual([]);
    expect(serve({ trustProxy: { preset: "fastly" } }).logs).toEqual([]);
  });
});

describe("policy functions", () => {
  const ok = (): Response => new Response("ok");
  const send = async (handler: (r: Request) => Response | Promise<Response>) => (await handler(new Request("http://x/"))).status;

  it("one built per request shares the counters of its figures, and is warned about once", async () => {
    const logs: string[] = [];
    const handler = withRateLimit(ok, {
      policy: () => fixedWindow({ limit: 30, window: "1m" }),
      getClientIp: () => "192.0.2.1",
      logger: { warn: (m) => logs.push(m) },
    });
    const statuses: number[] = [];
    for (let i = 0; i < 31; i++) statuses.push(await send(handler));
    expect(statuses.slice(0, 30).every((s) => s === 200)).toBe(true);
    expect(statuses[30]).toBe(429);
    expect(logs.filter((l) => l.includes("policyPerRequest"))).toHaveLength(1);
  });

  it("policies built once are not warned about; past 1000 distinct sets per rule, the oldest limiter goes and a warning says so", async () => {
    const logs: string[] = [];
    const PLANS = [fixedWindow({ limit: 1, window: "1m" }), fixedWindow({ limit: 2, window: "1m" })];
    let n = 0;
    const plain = withRateLimit(ok, {
      policy: () => PLANS[n++ % 2]!,
      getClientIp: () => "192.0.2.1",
      logger: { warn: (m) => logs.push(m) },
    });
    for (let i = 0; i < 40; i++) await send(plain);
    expect(logs).toEqual([]);
    let limit = 1;
    const many = withRateLimit(ok, {
      policy: () => fixedWindow({ limit: limit++, window: "1m" }),
      getClientIp: () => "192.0.2.1",
      logger: { warn: (m) => logs.push(m) },
    });
    for (let i = 0; i < 1001; i++) expect(await send(many)).toBe(200);
    expect(logs.filter((l) => l.includes("more than 1000 distinct policy sets"))).toHaveLength(1);
  });

  it("a policy function's async rejection fails the request with INVALID_ARGUMENT naming it", async () => {
    const handler = withRateLimit(ok, {
      policy: async () => {
        throw new Error("plan lookup failed");
      },
      getClientIp: () => "192.0.2.1",
    });
    await expect(Promise.resolve(handler(new Request("http://x/")))).rejects.toMatchObject({
      code: "INVALID_ARGUMENT",
      message: "rateLimit(): the `policy` function threw: plan lookup failed. The request was not counted.",
    });
  });
});

describe("policy functions in rules", () => {
  it("count each set under the rule's slug and the set's fingerprint, with or without a prefix", async () => {
    const store = memoryStore();
    const PLANS = {
      free: fixedWindow({ limit: 1, window: "1m", name: "free" }),
      pro: fixedWindow({ limit: 2, window: "1m", name: "pro" }),
    };
    const options = {
      store,
      rules: {
        "POST /login": {
          policy: (req: { header(n: string): string | undefined }) => PLANS[req.header("x-plan") === "pro" ? "pro" : "free"],
        },
      },
      getClientIp: () => "192.0.2.1",
    };
    const handler = withRateLimit(() => new Response("ok"), { ...options, prefix: "app:" });
    const post = (plan: string) => handler(new Request("http://x/login", { method: "POST", headers: { "x-plan": plan } }));
    expect((await post("free")).status).toBe(200);
    expect((await post("free")).status).toBe(429);
    expect((await post("pro")).status).toBe(200);
    const slug = ruleSlug("POST /login");
    expect(handler.limiterFor("POST /login", PLANS.free).prefix).toBe(`app:${slug}:${policyFingerprint([PLANS.free])}:`);
    expect(handler.limiterFor("POST /login", PLANS.pro).prefix).toBe(`app:${slug}:${policyFingerprint([PLANS.pro])}:`);
    expect((await handler.peek("192.0.2.1", { rule: "POST /login", policy: PLANS.pro })).remaining).toBe(1);
    // Another request than /login is not limited: no rule matches and there is no default.
    expect((await handler(new Request("http://x/other"))).status).toBe(200);
  });
});
