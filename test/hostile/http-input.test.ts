// Hostile requests through every adapter over raw TCP: forwarded headers of every shape and size,
// odd request-targets and methods, keys and costs an app's own functions might return. Whatever
// arrives, the server answers each request with well-formed HTTP, never crashes, lets nothing
// escape as an unhandled rejection, and answers 5xx only through the app's own error handler for
// the documented programmer mistake (a key or cost the limiter rejects: INVALID_ARGUMENT), which
// fails that request alone.
import { fixedWindow, FloodgateError, type HttpRateLimitOptions, slidingLog, slidingWindow, tokenBucket } from "@floodgate/core";
import { groupIp, inRange, type ParsedIp, parseForwarded, parseIp, parseRange } from "@floodgate/core/http";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADAPTERS, checkReply, escapeCollector, rawRequest, type RunningApp, runs } from "./support.ts";

// --- addresses and forwarding headers -------------------------------------------------------

const octet = fc.integer({ min: 0, max: 255 });
const ipv4 = fc.tuple(octet, octet, octet, octet).map((o) => o.join("."));
const hex = fc.integer({ min: 0, max: 0xffff }).map((n) => n.toString(16));
const ipv6 = fc.oneof(
  fc.array(hex, { minLength: 8, maxLength: 8 }).map((g) => g.join(":")),
  fc.tuple(fc.array(hex, { maxLength: 3 }), fc.array(hex, { maxLength: 3 })).map(([a, b]) => `${a.join(":")}::${b.join(":")}`),
  ipv4.map((v4) => `::ffff:${v4}`),
  ipv4.map((v4) => `64:ff9b::${v4}`),
  fc.array(hex, { minLength: 8, maxLength: 8 }).map((g) => g.join(":").toUpperCase()),
);
const garbage = fc.oneof(
  fc.string({ unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)), maxLength: 40 }),
  // Bytes Node may refuse in a header (NUL, DEL, high latin1): a 400 from Node, never from the app.
  fc.string({ unit: fc.integer({ min: 0, max: 0xff }).map((c) => String.fromCharCode(c === 10 || c === 13 ? 32 : c)), maxLength: 20 }),
  fc.constantFrom(
    "unknown",
    "_hidden",
    "_SEVKISEK",
    "",
    " ",
    ",",
    ";",
    '"',
    "[",
    "]",
    "[::1",
    "::1]",
    "1.2.3",
    "1.2.3.4.5",
    "01.2.3.4",
    "256.1.1.1",
    "1.2.3.4/24",
    ":::",
    "1::2::3",
    "%",
    "%eth0",
  ),
);
const port = fc.integer({ min: 0, max: 99_999 });
const address = fc.oneof(
  { weight: 3, arbitrary: ipv4 },
  { weight: 2, arbitrary: fc.tuple(ipv4, port).map(([ip, p]) => `${ip}:${p}`) },
  { weight: 3, arbitrary: ipv6 },
  { weight: 2, arbitrary: fc.tuple(ipv6, fc.constantFrom("%eth0", "%1", "%", "%25en0")).map(([ip, zone]) => `${ip}${zone}`) },
  { weight: 2, arbitrary: fc.tuple(ipv6, fc.option(port)).map(([ip, p]) => `[${ip}]${p === null ? "" : `:${p}`}`) },
  { weight: 3, arbitrary: garbage },
);
const spaced = fc.constantFrom(",", ", ", " ,", " , ", ",,", "\t,");
const list = (items: fc.Arbitrary<string>, max: number): fc.Arbitrary<string> =>
  fc.tuple(fc.array(items, { minLength: 1, maxLength: max }), spaced).map(([xs, sep]) => xs.join(sep));
const forwardedFor = fc.oneof(
  address,
  address.map((a) => `"${a.replace(/["\\]/g, "\\$&")}"`),
  address.map((a) => `"${a}`), // an unterminated quoted string
);
const forwardedElement = fc
  .tuple(fc.option(forwardedFor), fc.option(fc.constantFrom("proto=http", "by=_proxy", 'host="a;b,c"', "For=", "for", "=", ";;")))
  .map(([f, other]) =>
    [f === null ? undefined : `${["for", "For", "FOR"][f.length % 3]}=${f}`, other ?? undefined].filter((x) => x !== undefined).join(";")
  );

/** Header lines of forwarding information, sometimes repeated, sometimes huge. */
const forwardingHeaders = fc.oneof(
  list(address, 12).map((v) => [`X-Forwarded-For: ${v}`]),
  fc.tuple(list(address, 4), list(address, 4)).map(([a, b]) => [`X-Forwarded-For: ${a}`, `x-forwarded-for: ${b}`]),
  list(forwardedElement, 8).map((v) => [`Forwarded: ${v}`]),
  fc.tuple(list(forwardedElement, 3), list(address, 3)).map(([f, x]) => [`Forwarded: ${f}`, `X-Forwarded-For: ${x}`]),
  // Huge lists: near Node's 16 KB header limit, and past it (Node answers 431 itself).
  fc.tuple(ipv4, fc.integer({ min: 100, max: 2_500 })).map((
    [ip, n],
  ) => [`X-Forwarded-For: ${Array.from({ length: n }, () => ip).join(", ")}`]),
  fc.integer({ min: 50, max: 900 }).map((
    n,
  ) => [`Forwarded: ${Array.from({ length: n }, (_, i) => `for="[2001:db8::${(i % 0xffff).toString(16)}]:${i}"`).join(",")}`]),
  fc.constant([] as string[]),
);

// --- request-targets and methods ------------------------------------------------------------

const segment = fc.oneof(
  fc.constantFrom(
    "api",
    "API",
    "login",
    "files",
    "1",
    "..",
    ".",
    "",
    "%2e%2e",
    "%2E%2E",
    "%2F",
    "%00",
    "%",
    "%zz",
    "%E2%82%AC",
    "%C0%AF",
    "%ff",
    "\u00e9",
    ";x=1",
    "@",
    ":id",
    "*",
  ),
  fc.stringMatching(/^[A-Za-z0-9._~!$&'()*+,;=:@%-]{0,12}$/),
);
const path = fc.tuple(
  fc.constantFrom("/", "//", "/api/", "/files/", "/login", "///api//"),
  fc.array(segment, { maxLength: 8 }),
  fc.constantFrom("/", "//", "/./", "/../"),
)
  .map(([start, segments, separator]) => start + segments.join(separator));
const target = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.tuple(path, fc.option(fc.constantFrom("?a=1", "?", "?x=%zz&y=//", "#frag", "?q=1#f", "#", "?%00"))).map(([p, q]) =>
      p + (q ?? "")
    ),
  },
  {
    weight: 2,
    arbitrary: fc.tuple(fc.constantFrom("http://evil.example", "HTTP://127.0.0.1:80", "https://a@b:1", "http://[::1]", "ftp://x"), path)
      .map(([origin, p]) => origin + p),
  },
  { weight: 1, arbitrary: fc.integer({ min: 1_000, max: 20_000 }).map((n) => `/api/${"a".repeat(n)}`) },
  { weight: 1, arbitrary: fc.constantFrom("*", "api", "", "/%", "/api/%2", "/\u00ff") },
);
const method = fc.oneof(
  { weight: 5, arbitrary: fc.constantFrom("GET", "POST", "HEAD", "PUT", "DELETE", "OPTIONS", "PATCH") },
  { weight: 2, arbitrary: fc.constantFrom("get", "Post", "PURGE", "M-SEARCH", "PROPFIND", "FOO", "G-T", "GET\t") },
  { weight: 1, arbitrary: fc.stringMatching(/^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,12}$/) },
);

// --- what an app's key and cost functions return --------------------------------------------

const LONE = ["\uD800", "\uDBFF", "\uDC00", "\uDFFF"];
const keyPart = fc.oneof(
  fc.constantFrom(
    "{",
    "}",
    "*",
    ":",
    "\u0000",
    "\n",
    "\r\n",
    "%",
    "%7D",
    "fg:",
    "default:",
    "GET /api:",
    ...LONE,
    "\u{1F600}",
    "e\u0301",
    "\u00e9",
    "\uFFFD",
    " ",
  ),
  fc.string({ maxLength: 8 }),
);
const keyValue = fc.oneof(
  { weight: 8, arbitrary: fc.array(keyPart, { minLength: 1, maxLength: 10 }).map((parts) => parts.join("")) },
  {
    weight: 2,
    arbitrary: fc.tuple(fc.integer({ min: 900, max: 10_240 }), fc.constantFrom("x", ":", "\uD800", "\u0000")).map(([n, c]) => c.repeat(n)),
  },
  { weight: 1, arbitrary: fc.constantFrom<unknown>(undefined, "", null, 42, {}, ["a"], true) },
  // No key from the app: the client address decides, read through the forwarding headers.
  { weight: 4, arbitrary: fc.constantFrom<unknown>(undefined, "") },
);
const costValue = fc.oneof(
  { weight: 6, arbitrary: fc.integer({ min: 0, max: 4 }) },
  {
    weight: 4,
    arbitrary: fc.constantFrom<unknown>(
      -1,
      -0,
      0.5,
      1.5,
      NaN,
      Infinity,
      -Infinity,
      "1",
      "",
      null,
      undefined,
      1e300,
      2 ** 53,
      2 ** 53 - 1,
      2 ** 31,
      {},
      [1],
    ),
  },
  { weight: 1, arbitrary: fc.double() },
);

const validCost = (c: unknown): c is number => typeof c === "number" && Number.isInteger(c) && c >= 0 && c <= Number.MAX_SAFE_INTEGER;
/** What the limiter accepts after the HTTP layer's fallback (`undefined`, `""`: the client address) and shortening. */
const validKey = (k: unknown): boolean => k === undefined || k === "" || (typeof k === "string" && k.charCodeAt(0) !== 0);

interface Case {
  key: unknown;
  cost: unknown;
  async: boolean;
}

const exchange = fc.record({
  server: fc.nat(),
  method,
  target,
  forwarding: forwardingHeaders,
  key: keyValue,
  cost: costValue,
  async: fc.boolean(),
});

/** Each request names its case; the app's key and cost functions look it up. */
const cases = new Map<string, Case>();
let nextCase = 0;
const lookup = (header: string | undefined): Case | undefined => (header === undefined ? undefined : cases.get(header));
const maybeAsync = <T>(c: Case | undefined, value: T): T | Promise<T> => (c?.async ? Promise.resolve(value) : value);

const policy = fixedWindow({ limit: 5, window: "1m" });
const logs: string[] = [];
const base: HttpRateLimitOptions<any> = {
  rules: {
    "GET /api/:id": slidingWindow({ limit: 3, window: "1m" }),
    "POST /login": tokenBucket({ capacity: 2, refillRate: 1 }),
    "/files/*": slidingLog({ limit: 4, window: "1m" }),
    default: policy,
  },
  key: (req) => {
    const c = lookup(req.header("x-case"));
    return maybeAsync(c, c?.key) as string | undefined;
  },
  cost: (req) => {
    const c = lookup(req.header("x-case"));
    return maybeAsync(c, c === undefined ? 1 : c.cost) as number;
  },
  logger: { warn: (message) => void logs.push(message) },
};
/** Two deployments per adapter: trusting every X-Forwarded-For hop, and trusting loopback proxies through Forwarded. */
const DEPLOYMENTS: HttpRateLimitOptions<any>[] = [
  { ...base, trustProxy: true },
  { ...base, trustProxy: ["127.0.0.0/8", "::1"], proxyHeader: "forwarded", ipv6Subnet: 48 },
];

/**
 * The client a deployment keys by when the key function gives none, read independently of the
 * adapters from the header lines sent: the chain from the right, through trusted hops, stopping
 * at the first entry that is not an address (keyed by the proxy that passed it on).
 */
function expectedClientKey(deployment: number, lines: readonly string[]): string {
  const values = (name: string): string[] =>
    lines.filter((l) => l.toLowerCase().startsWith(`${name}:`)).map((l) => l.slice(name.length + 1).trim());
  const loopback = [parseRange("127.0.0.0/8")!, parseRange("::1")!];
  const [chain, trusts, subnet] = deployment === 0
    ? [values("x-forwarded-for").join(", ").split(",").map((s) => s.trim()), () => true, 64]
    : [parseForwarded(values("forwarded").join(", ")), (ip: ParsedIp) => loopback.some((r) => inRange(ip, r)), 48];
  let current = parseIp("127.0.0.1")!;
  if (chain.length === 1 && chain[0] === "") return groupIp(current, subnet); // no header at all
  for (let i = chain.length - 1; i >= 0 && trusts(current); i--) {
    const next = parseIp(chain[i]!);
    if (next === undefined) break;
    current = next;
  }
  return groupIp(current, subnet);
}

const collector = escapeCollector();
afterAll(() => collector.uninstall());

describe.each(ADAPTERS)("$name under hostile requests", (adapter) => {
  const apps: RunningApp[] = [];
  beforeAll(async () => {
    for (const options of DEPLOYMENTS) apps.push(await adapter.start(options));
  });
  afterAll(async () => {
    for (const app of apps) await app.close();
  });

  it("answers every request well-formed, with no 5xx but the app's own for INVALID_ARGUMENT", async () => {
    let healthy = 0;
    const statuses = new Map<number, number>();
    await fc.assert(
      fc.asyncProperty(exchange, async (x) => {
        const app = apps[x.server % apps.length]!;
        const id = `c${nextCase++}`;
        cases.set(id, { key: x.key, cost: x.cost, async: x.async });
        const head = [`${x.method} ${x.target} HTTP/1.1`, "Host: 127.0.0.1", `X-Case: ${id}`, ...x.forwarding].join("\r\n");
        const errorsBefore = app.errors.length;
        const reply = await rawRequest(app.port, head);
        const expectedError = !validCost(x.cost) || (x.cost > 0 && !validKey(x.key));
        checkReply(reply, expectedError, head);
        statuses.set(reply.status, (statuses.get(reply.status) ?? 0) + 1);
        if (reply.status === 500) {
          expect(app.errors.length).toBe(errorsBefore + 1);
          expect((app.errors.at(-1) as FloodgateError).code).toBe("INVALID_ARGUMENT");
          // The mistake fails this request alone: the next one, from the same client, goes through.
          const fine = `c${nextCase++}`;
          cases.set(fine, { key: `healthy-${healthy++}`, cost: 1, async: false });
          const next = await rawRequest(app.port, ["GET /after HTTP/1.1", "Host: 127.0.0.1", `X-Case: ${fine}`].join("\r\n"));
          expect(next.status).toBe(200);
        }
        const counted = reply.status === 200 && !reply.bodiless && JSON.parse(reply.body).counted === true;
        if (counted && (x.key === undefined || x.key === "")) {
          // No key from the app: the client address, through the trusted proxies only.
          expect(JSON.parse(reply.body).key).toBe(expectedClientKey(x.server % apps.length, x.forwarding));
        }
        if (
          reply.status === 200 && !reply.bodiless && JSON.parse(reply.body).counted === true && typeof x.key === "string" && x.key !== "" &&
          x.key.length <= 1000
        ) {
          // A valid key the app returned is counted as it is: no trimming, no normalising.
          expect(JSON.parse(reply.body).key).toBe(x.key);
        }
        cases.delete(id);
      }),
      {
        numRuns: runs(120),
        // Besides the random ones, one of each outcome the checks below expect: a cost over the
        // limit (429), a cost that is not a number (the app's 500), a method Node refuses (400).
        examples: [
          [{ server: 0, method: "GET", target: "/api/1", forwarding: [], key: "over", cost: 10, async: false }],
          [{ server: 1, method: "POST", target: "/login", forwarding: [], key: "nan", cost: NaN, async: true }],
          [{ server: 0, method: "G(T", target: "/", forwarding: [], key: undefined, cost: 1, async: false }],
        ],
      },
    );
    expect(collector.escaped).toEqual([]);
    // The run reached every outcome: admitted, limited, the app's own 500, and Node's own 4xx.
    expect([...statuses.keys()].sort()).toEqual(expect.arrayContaining([200, 429, 500]));
    expect([...statuses.keys()].some((s) => s >= 400 && s < 500 && s !== 429)).toBe(true);
  });

  it("reports a key the limiter refuses as INVALID_ARGUMENT naming the value, and counts nothing", async () => {
    for (const [key, shown] of [[null, "null"], [42, "42"], ["\u0000victim", '"\\u0000victim"']] as const) {
      const id = `c${nextCase++}`;
      cases.set(id, { key, cost: 1, async: true });
      const reply = await rawRequest(
        apps[1]!.port,
        ["POST /login HTTP/1.1", "Host: 127.0.0.1", `X-Case: ${id}`, "Content-Length: 0"].join("\r\n"),
      );
      expect(reply.status).toBe(500);
      const body = JSON.parse(reply.body);
      expect(body.code).toBe("INVALID_ARGUMENT");
      // A key function's non-string is named as such; a string the limiter refuses, by the limiter.
      expect(body.message).toContain(typeof key === "string" ? `Invalid key: received ${shown}` : `the \`key\` function returned ${shown}`);
    }
    expect(collector.escaped).toEqual([]);
  });

  it("reports a cost function's garbage as INVALID_ARGUMENT naming the value", async () => {
    for (
      const [cost, shown] of [[-1, "-1"], [1.5, "1.5"], [NaN, "NaN"], ["1", '"1"'], [1e300, "1e+300"], [
        2 ** 53,
        "9007199254740992",
      ]] as const
    ) {
      const id = `c${nextCase++}`;
      cases.set(id, { key: "k", cost, async: false });
      const reply = await rawRequest(apps[0]!.port, ["GET /x HTTP/1.1", "Host: 127.0.0.1", `X-Case: ${id}`].join("\r\n"));
      expect(reply.status).toBe(500);
      const body = JSON.parse(reply.body);
      expect(body.code).toBe("INVALID_ARGUMENT");
      // The cost function's own error, naming it and the accepted range, for a value too large too.
      expect(body.message).toContain(`the \`cost\` function returned ${shown}`);
      expect(body.message).toContain("from 0 to 9007199254740991");
    }
    expect(collector.escaped).toEqual([]);
  });
});
