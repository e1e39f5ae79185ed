// The options of the rate limiters users move from (express-rate-limit, hono-rate-limiter,
// koa-ratelimit, rate-limiter-flexible, @upstash/ratelimit), each with Floodgate's equivalent:
// consulted only when an option is unknown (or, for koa-ratelimit's `headers` object, invalid),
// so that the error names what to write instead. The advice agrees with docs/migrating/*.md.

const ERL = "express-rate-limit";
const HRL = "hono-rate-limiter";
const KOA = "koa-ratelimit";
const RLF = "rate-limiter-flexible";
const UPSTASH = "@upstash/ratelimit";

const POLICY = 'use `policy: fixedWindow({ limit, window })` (`window` in ms or as "1m"; or slidingWindow, slidingLog, tokenBucket)';
const KEY = 'use `key(req)`, returning the key (`undefined` or "" falls back to the client IP)';
const STORE = "use `store: redisStore({ client })` (ioredis, node-redis), `upstashStore({ redis })` or `memoryStore()` (the default)";
const DECISION =
  'no equivalent: the decision is always `req.rateLimit` (Express), `c.get("rateLimit")` (Hono), `ctx.state.rateLimit` (Koa)';

/** Each foreign option: the libraries that have it, and what to use instead. */
const FOREIGN: Readonly<Record<string, readonly [libraries: string, advice: string]>> = {
  windowMs: [`${ERL}, ${HRL}`, POLICY],
  max: [`${ERL}, ${KOA}`, POLICY.replace("limit, window", "limit: max, window")],
  limit: [`${ERL}, ${HRL}`, `${POLICY}; a limit per route is a rule: \`rules: { "GET /api/search": policy, default: policy }\``],
  legacyHeaders: [
    ERL,
    'use `headers` (the default `["legacy", "draft-11"]` includes the legacy X-RateLimit-* headers; `headers: "draft-11"` leaves them out)',
  ],
  standardHeaders: [
    `${ERL}, ${HRL}`,
    'use `headers: "draft-6"`, `"draft-7"` or `"draft-11"`, or a list with `"legacy"` (default `["legacy", "draft-11"]`)',
  ],
  keyGenerator: [`${ERL}, ${HRL}`, KEY],
  identifier: [ERL, "use the policy's `name` (`fixedWindow({ limit, window, name })`)"],
  requestPropertyName: [`${ERL}, ${HRL}`, DECISION],
  requestStorePropertyName: [
    HRL,
    "no equivalent: build the limiter with `createRateLimiter`, pass it as `limiter`, and call its `peek(key)` or `reset(key)`",
  ],
  passOnStoreError: [ERL, 'use `onStoreError: "allow"` (the default, "fallback", keeps limiting in memory)'],
  validate: [ERL, "use `warnings` (options are always checked at construction)"],
  driver: [KOA, STORE],
  db: [KOA, STORE],
  duration: [
    `${KOA}, ${RLF}`,
    "use the policy's `window`: `policy: fixedWindow({ limit, window })` (`window` in ms or as \"1h\"; rate-limiter-flexible's `duration` is in seconds)",
  ],
  id: [KOA, "use `key(req)` (an `id` returning false is `skip(req)` returning true)"],
  blacklist: [KOA, "use `denyList` (IPs, CIDR ranges or keys, answered 403 before any counting)"],
  whitelist: [KOA, "use `allowList` (IPs, CIDR ranges or keys) or `skip(req)`"],
  disableHeader: [KOA, "use `headers: false`"],
  errorMessage: [KOA, "use `message` (the text in the default JSON body), or `handler` for a text body"],
  namespace: [KOA, 'use `prefix` (it includes its separator: "limit:")'],
  status: [KOA, "use `statusCode`"],
  points: [RLF, "use `policy: fixedWindow({ limit: points, window: duration * 1000 })`"],
  blockDuration: [RLF, "use a second, longer policy in the same array: `policy: [fixedWindow(...), slidingLog({ limit, window })]`"],
  keyPrefix: [RLF, 'use `prefix` (it includes its separator: "rlflx:")'],
  storeClient: [RLF, "use `store: redisStore({ client })`"],
  insuranceLimiter: [RLF, 'use `onStoreError: "fallback"` (the middlewares\' default: an in-memory limiter with the same policies)'],
  limiter: [UPSTASH, "use `policy: slidingWindow({ limit, window })` (or fixedWindow, tokenBucket)"],
  redis: [UPSTASH, "use `store: upstashStore({ redis })`"],
  analytics: [UPSTASH, "no equivalent: count decisions in the `onDecision` and `onLimited` hooks"],
  ephemeralCache: [UPSTASH, "the Redis stores' `denyCache` (on by default; `denyCacheMaxKeys` bounds it)"],
  timeout: [UPSTASH, 'use `timeoutMs` with `onStoreError: "allow"` (the middlewares; `timeoutMs` is the deadline of a store call)'],
};

/**
 * What to say about `option`, unknown to Floodgate's function but known to another rate limiter:
 * `(library); use ...`, or `undefined` when it is no other library's option either.
 */
export function foreignOption(option: string): string | undefined {
  if (!Object.hasOwn(FOREIGN, option)) return undefined;
  const [libraries, advice] = FOREIGN[option]!;
  return `(${libraries}); ${advice}`;
}

/** What to say about an invalid value another library gives that option: koa-ratelimit's `headers` object renames its headers. */
export function foreignValue(option: string, value: unknown): string | undefined {
  if (option !== "headers" || typeof value !== "object" || value === null || Array.isArray(value)) return undefined;
  return `(${KOA}'s header names: Floodgate's are fixed, see HEADER_NAMES; \`headers\` chooses the formats, \`false\` sends none)`;
}

/** The two look-ups, as `parseOptions` takes them. */
export const FOREIGN_OPTIONS: ForeignOptions = { option: foreignOption, value: foreignValue, names: /* @__PURE__ */ Object.keys(FOREIGN) };

/** How `parseOptions` asks about an unknown option, or an invalid value, in another library's terms. */
export interface ForeignOptions {
  /** The hint for an unknown option, or `undefined`. */
  option(name: string): string | undefined;
  /** The hint for an invalid value of a known option, or `undefined`. */
  value(name: string, value: unknown): string | undefined;
  /** Every option of another library known here, for "did you mean" to suggest from. */
  readonly names?: readonly string[];
}
