import { describeValue, FloodgateError } from "../errors.ts";
import { memoryStore } from "../stores/memory-store.ts";
import { isThenable } from "../stores/store.ts";
import { sha256Hex, utf16Bytes } from "../sha256.ts";
import { createClientIpResolver } from "./client-ip.ts";
import { RETRY_AFTER } from "./headers.ts";
import { hookCaller } from "./hooks.ts";
import { formatIp, groupIp, inRange, type IpRange, type ParsedIp, parseIp, parseRange } from "./ip.ts";
import { headerFormats, type HttpRateLimitOptions, parseHttpOptions, type RequestAccess, WHERE } from "./options.ts";
import { createResponder, limitedRetryAfter, type PreparedResponse } from "./response.ts";
import { RateLimitResult, type RequestEnd, RequestRateLimitInfo, RequestView } from "./result.ts";
import { compileRules } from "./rules.ts";
import { reservationEnd } from "./settlement.ts";
import { storeFailurePolicy, storeGuard, type StoreOutcome } from "./store-guard.ts";
import { Warnings } from "./warnings.ts";

// The per-request decision: construction validates and compiles everything once; `decideRequest`
// then reads the request's facts once each and builds its result in one step.

/** The core of every Floodgate middleware; adapters translate to and from it. */
export interface HttpRateLimiter<Raw> {
  /**
   * Decides for one request. `undefined` means not limited at all (skipped, allow-listed, or no
   * rule applies): continue without headers. Never rejects because of the store.
   * @param peerIp - the connection's peer address (or, when `ipResolved`, the client address itself)
   * @param ipResolved - the address was already resolved through trusted proxies (e.g. Express's `req.ip`)
   */
  decideRequest(raw: Raw, peerIp: string | undefined, ipResolved?: boolean): Promise<RateLimitResult | undefined>;
}

/** Set once any middleware has decided a request: a middleware built after that is likely built per request. */
let requestsServed = false;
let createdWhileServing = 0;
const PER_REQUEST_THRESHOLD = 20;
/** Requests looked up for the double-count warning: a double mount shows on every request, so the first ones tell. */
const DOUBLE_COUNT_WATCH = 1000;
/**
 * Requests checked for forwarding headers that an untrusted proxy setting ignores. A
 * misconfiguration shows on the first requests; checking every request would read two headers
 * each time (which materialises the whole header list on some servers, e.g. @hono/node-server).
 */
const FORWARDED_WATCH = 1000;
/** The key of requests with no client address and no key function. */
const UNKNOWN_CLIENT_KEY = "unknown";

/** Longest key a key function may return that is counted as it is. */
const MAX_PLAIN_KEY = 1000;
/** What a longer key keeps of its own text before its digest: 959 + "#" + 64 hex digits = 1024, the limiter's maximum. */
const LONG_KEY_HEAD = 959;

/**
 * Keys longer than {@link MAX_PLAIN_KEY} become their head, `#` and the SHA-256 of the whole (its
 * UTF-16 code units): 1,024 characters, a length no key counted as it is can have, so no short key
 * spells a shortened one, and two long keys share a counter only if SHA-256 collides. What a key
 * function returns unchecked (`null`, a number) goes on as is: the limiter rejects it
 * (INVALID_ARGUMENT naming the key), not a TypeError here.
 */
export function fitKey(key: string): string {
  if (typeof key !== "string" || key.length <= MAX_PLAIN_KEY) return key;
  return `${key.slice(0, LONG_KEY_HEAD)}#${sha256Hex(utf16Bytes(key))}`;
}

/**
 * Builds the framework-neutral HTTP rate limiter that every adapter calls: validates `options`
 * once, compiles rules, header writers and the client-IP resolver, then answers
 * `decideRequest()` per request. Adapters give `access`, how to read their request.
 *
 * @example
 * const http = createHttpRateLimiter({ policy: slidingWindow({ limit: 100, window: "1m" }) }, {
 *   method: (r: Request) => r.method, path: (r) => new URL(r.url).pathname, header: (r, n) => r.headers.get(n) ?? undefined,
 * });
 * const result = await http.decideRequest(request, "203.0.113.7");
 * @param adapterFunction - the name of an adapter's own function-valued option (Hono's
 *   `getConnInfo`), validated here with the others; the adapter reads it from `options`.
 */
export function createHttpRateLimiter<Raw>(
  options: HttpRateLimitOptions<Raw>,
  access: RequestAccess<Raw>,
  adapterFunction?: string,
): HttpRateLimiter<Raw> {
  const o = parseHttpOptions(options, adapterFunction);
  const warnings = new Warnings(o.warnings, o.logger ?? console);
  const clock = o.clock ?? Date.now;
  const ipv6Subnet = o.ipv6Subnet ?? 64;
  const trustProxy = o.trustProxy ?? false;
  const resolveIp = createClientIpResolver(trustProxy, o.proxyHeader ?? "x-forwarded-for", warnings);
  if (trustProxy === true) warnings.emit("trustProxyTrue");
  if (requestsServed && ++createdWhileServing === PER_REQUEST_THRESHOLD) warnings.emit("limiterPerRequest");

  const callHook = hookCaller(warnings);
  const rules = compileRules(o, {
    caseSensitive: o.caseSensitive ?? false,
    clock,
    formats: headerFormats(o.headers),
    baseStore: o.store ?? o.limiter?.store ?? memoryStore(),
    guard: storeGuard({ timeoutMs: o.timeoutMs, circuitBreaker: o.circuitBreaker, logger: o.logger ?? console }),
    failurePolicy: storeFailurePolicy(o.onStoreError, clock, callHook),
  });

  const allowIps: IpRange[] = [];
  const allowKeys = new Set<string>();
  for (const entry of o.allowList ?? []) {
    const range = parseRange(entry);
    if (range !== undefined) allowIps.push(range);
    else allowKeys.add(entry);
  }
  const refundWhen = o.skipSuccessfulRequests || o.skipFailedRequests
    ? (status: number): boolean => status > 0 && status < 400 ? o.skipSuccessfulRequests === true : o.skipFailedRequests === true
    : undefined;
  const respond = createResponder(o);

  /** Whether rules match this request's path case-sensitively: as set, else as the framework routes it. */
  const caseSensitiveFor = (raw: Raw): boolean => {
    const routing = access.caseSensitiveRouting?.(raw);
    if (o.caseSensitive === true && routing === false) {
      throw new FloodgateError(
        "INVALID_OPTION",
        `${WHERE}: option \`caseSensitive\` is true, but the framework routes paths case-insensitively, so a request in another case (/API/LOGIN for /api/login) would reach a route uncounted by its rule. Leave \`caseSensitive\` out (rules then follow the framework's routing), or make the routing case-sensitive (Express: app.set("case sensitive routing", true); @koa/router: new Router({ sensitive: true })).`,
      );
    }
    return o.caseSensitive ?? routing ?? false;
  };

  /** The client address, through trusted proxies only, and what is wrong with it, warned once. */
  let forwardedWatched = 0;
  const clientOf = (raw: Raw, peerIp: string | undefined, ipResolved: boolean): ParsedIp | undefined => {
    let client: ParsedIp | undefined;
    let invalidIp: string | undefined;
    if (ipResolved) {
      client = peerIp === undefined ? undefined : parseIp(peerIp);
      if (client === undefined) invalidIp = peerIp;
    } else {
      const found = resolveIp(peerIp, raw, access.header);
      client = found.ip;
      invalidIp = found.invalid;
    }
    if (invalidIp !== undefined) warnings.emit("invalidIp", `received ${describeValue(invalidIp)}`);
    if (client === undefined) warnings.emit("noClientIp");
    if (trustProxy === false && !ipResolved && forwardedWatched < FORWARDED_WATCH && warnings.pending("forwardedHeaderIgnored")) {
      forwardedWatched++;
      if (access.header(raw, "x-forwarded-for") !== undefined || access.header(raw, "forwarded") !== undefined) {
        warnings.emit("forwardedHeaderIgnored");
      }
    }
    return client;
  };

  return {
    async decideRequest(raw, peerIp, ipResolved = false) {
      requestsServed = true;
      const method = access.method(raw).toUpperCase();
      const path = access.path(raw);
      const client = clientOf(raw, peerIp, ipResolved);
      const req = new RequestView(raw, method, path, client === undefined ? undefined : formatIp(client), access);

      if (o.skip !== undefined) {
        const skipped = o.skip(req);
        if (isThenable(skipped) ? await skipped : skipped) return undefined;
      }
      if (client !== undefined) { for (const range of allowIps) if (inRange(client, range)) return undefined; }
      const rule = rules.routed ? rules.match(method, path, caseSensitiveFor(raw)) : rules.match(method, path);
      if (rule === undefined) return undefined;

      const keyFunction = rule.key ?? o.key;
      const returnedKey = keyFunction?.(req);
      const givenKey = isThenable(returnedKey) ? await returnedKey : returnedKey;
      const key = givenKey === undefined || givenKey === ""
        ? (client === undefined ? UNKNOWN_CLIENT_KEY : groupIp(client, ipv6Subnet))
        : fitKey(givenKey);
      if (allowKeys.has(key)) return undefined;

      const returnedCost = typeof rule.cost === "number" ? rule.cost : rule.cost(req);
      const cost = isThenable(returnedCost) ? await returnedCost : returnedCost;
      // The limiter's own bound too, so the error names the cost function rather than contradicting itself.
      if (typeof cost !== "number" || !Number.isInteger(cost) || cost < 0 || cost > Number.MAX_SAFE_INTEGER) {
        throw new FloodgateError(
          "INVALID_ARGUMENT",
          `${WHERE}: the \`${rule.costName}\` function returned ${
            describeValue(cost)
          }; it must return a whole number from 0 to 9007199254740991 (0: the request is not counted).`,
        );
      }
      if (cost === 0) return undefined;

      if (rule.watched < DOUBLE_COUNT_WATCH && typeof raw === "object" && raw !== null && warnings.pending("doubleCount")) {
        rule.watched++;
        if (rule.seen.has(raw)) warnings.emit("doubleCount", `rule ${rule.name}, key ${describeValue(key)}`);
        else rule.seen.add(raw);
      }

      const answer = rule.reserves ? rule.limiter.reserve(key, cost, req) : rule.limiter.consume(key, cost, req);
      const outcome: StoreOutcome = isThenable(answer) ? await answer : answer;
      const info = new RequestRateLimitInfo(outcome, key, rule.name, cost);
      const decision = outcome.decision;
      const headers: string[] = [];
      if (decision !== undefined) rule.writeHeaders?.(decision, outcome.atMs, headers);
      const retryAfter = info.allowed ? 0 : limitedRetryAfter(decision, rule.policies, rule.limiter.openForMs(outcome.atMs), outcome.atMs);
      if (!info.allowed) headers.push(RETRY_AFTER, `${retryAfter}`);

      // What the end of the response does, known now: `pending` waits for it from here on.
      const reservation = outcome.reservation;
      const end: RequestEnd | undefined = reservation !== undefined
        ? reservationEnd(rule.limiter, { ...outcome, reservation }, info, req, rule.actual, refundWhen, warnings)
        : refundWhen !== undefined && info.allowed && decision !== undefined
        ? (status) => refundWhen(status) ? rule.limiter.refund(outcome.source, key, cost, decision.charge) : undefined
        : undefined;
      const ended = end === undefined ? undefined : info.untilEnd();
      // The hooks first: a custom handler that throws fails the request, not the metrics of a denial.
      const decided = callHook("onDecision", o.onDecision, info, req);
      if (isThenable(decided)) info.wait(decided);
      let response: PreparedResponse | undefined;
      if (!info.allowed) {
        const limited = callHook("onLimited", o.onLimited, info, req);
        if (isThenable(limited)) info.wait(limited);
        const prepared = respond(req, info, headers, retryAfter);
        response = isThenable(prepared) ? await prepared : prepared;
      }
      return new RateLimitResult(info, headers, response, end, ended);
    },
  };
}
