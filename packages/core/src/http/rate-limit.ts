import { describeValue, FloodgateError } from "../errors.ts";
import { memoryStore } from "../stores/memory-store.ts";
import { isThenable } from "../stores/store.ts";
import { sha256Hex, utf16Bytes } from "../sha256.ts";
import { createClientIpResolver } from "./client-ip.ts";
import { RETRY_AFTER } from "./headers.ts";
import { hookCaller } from "./hooks.ts";
import { formatIp, groupIp, inRange, type IpRange, type ParsedIp, parseIp, parseRange } from "./ip.ts";
import {
  type AdapterOptions,
  headerFormats,
  type HttpRateLimitOptions,
  type MaybePromise,
  parseHttpOptions,
  type RateLimitRequest,
  type RequestAccess,
  WHERE,
} from "./options.ts";
import { createResponder, DENIED_RESPONSE, limitedRetryAfter, type PreparedResponse } from "./response.ts";
import { RateLimitResult, type RequestEnd, RequestRateLimitInfo, RequestView } from "./result.ts";
import { type BoundLimiter, type CompiledRule, compileRules } from "./rules.ts";
import type { Decision, RateLimiter } from "../limiter/index.ts";
import type { Policy } from "../policy.ts";
import { reservationEnd } from "./settlement.ts";
import { errorText, storeFailurePolicy, storeGuard, type StoreOutcome } from "./store-guard.ts";
import { Warnings } from "./warnings.ts";

// The per-request decision: construction validates and compiles everything once; `decideRequest`
// then reads the request's facts once each and builds its result in one step.

/**
 * Calls a user function given as option `option` (`policy`, `key`, `cost`): one that throws or
 * rejects fails the request with an INVALID_ARGUMENT error naming the option (the cause kept).
 */
function called<R, T>(option: string, fn: (req: RateLimitRequest<R>) => MaybePromise<T>, req: RateLimitRequest<R>): MaybePromise<T> {
  const failed = (error: unknown): FloodgateError =>
    new FloodgateError(
      "INVALID_ARGUMENT",
      `${WHERE}: the \`${option}\` function threw: ${errorText(error)}. The request was not counted.`,
      { cause: error },
    );
  let returned: MaybePromise<T>;
  try {
    returned = fn(req);
  } catch (error) {
    throw failed(error);
  }
  return isThenable(returned) ? returned.then(undefined, (error: unknown) => Promise.reject(failed(error))) : returned;
}

/** Which of a middleware's limiters a {@link RateLimitHandle} call addresses. */
export interface HandleOptions {
  /** The rule, by its pattern exactly as written in `rules` (e.g. `"POST /login"`); default `"default"`. */
  rule?: string;
  /**
   * For a rule whose `policy` is a function: the policy set (as the function returns it) whose
   * counters to address. Without it, `reset` resets the key in every set the rule has counted
   * in so far; `peek`, `penalty` and `limiterFor` need it.
   */
  policy?: Policy | readonly Policy[];
}

/**
 * The handle on a middleware's counters that `rateLimit(...)` (every adapter) and
 * `withRateLimit(...)` return alongside the middleware: each call addresses exactly the namespace
 * and store the middleware counts the rule in. Keys are the ones the middleware counts: what
 * the `key` function returns (the client address, grouped, without one).
 *
 * @example
 * const limit = rateLimit({ rules: { "POST /login": { policy, key: userKey } }, skipSuccessfulRequests: true });
 * // after a successful login:
 * await limit.reset(`user:${name}`, { rule: "POST /login" });
 */
export interface RateLimitHandle {
  /** Clears `key`'s counters (and block) under the rule. */
  reset(key: string, options?: HandleOptions): Promise<void>;
  /** The decision a request of cost 1 would get now under the rule, charging nothing. */
  peek(key: string, options?: HandleOptions): Promise<Decision>;
  /** Charges `cost` (default 1) to `key` under the rule whatever it admits, saturating (see `RateLimiter.penalty`). */
  penalty(key: string, options?: HandleOptions & { cost?: number }): Promise<void>;
  /**
   * The limiter the middleware counts the rule (default `"default"`) in: for `block`, `unblock`,
   * `refund` and the rest. For a rule whose `policy` is a function, give the policy set.
   */
  limiterFor(rule?: string, policy?: Policy | readonly Policy[]): RateLimiter;
  /**
   * Resolves once everything the middleware has started after responses has finished (the
   * settlements of costs settled later, the releases of concurrency units, the refunds of
   * `skipSuccessfulRequests` and `skipFailedRequests`, the promises hooks returned), and every
   * limiter its rules use (those of a `policy` function's sets too) has flushed: in leased
   * mode, its leases given back. For a SIGTERM handler (close the server first, so that no
   * response is still under way) and for tests. Never rejects: a store failure meanwhile goes to
   * `onStoreError` (or the logger), as it would without `flush()`.
   */
  flush(): Promise<void>;
}

/** Gives `target` (a middleware function) the handle's methods, bound to `limiter`'s. */
export function withHandle<T extends object>(target: T, limiter: RateLimitHandle): T & RateLimitHandle {
  return Object.assign(target, {
    reset: limiter.reset,
    peek: limiter.peek,
    penalty: limiter.penalty,
    limiterFor: limiter.limiterFor,
    flush: limiter.flush,
  });
}

/** The core of every Floodgate middleware; adapters translate to and from it. */
export interface HttpRateLimiter<Raw> extends RateLimitHandle {
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
 * @param adapterOptions - an adapter's own options, validated here with the others: the name of
 *   a function-valued one (Hono's `getConnInfo`), or names mapped to `"function"` or `"boolean"`
 *   (Koa's `{ throw: "boolean" }`); the adapter reads them from `options`.
 */
export function createHttpRateLimiter<Raw>(
  options: HttpRateLimitOptions<Raw>,
  access: RequestAccess<Raw>,
  adapterOptions?: AdapterOptions,
): HttpRateLimiter<Raw> {
  const o = parseHttpOptions(options, adapterOptions);
  const warnings = new Warnings(o.warnings, o.logger ?? console);
  const clock = o.clock ?? Date.now;
  const ipv6Subnet = o.ipv6Subnet ?? 64;
  const trustProxy = o.trustProxy ?? false;
  const resolveIp = createClientIpResolver(trustProxy, o.proxyHeader ?? "x-forwarded-for", warnings);
  if (trustProxy === true) warnings.emit("trustProxyTrue");
  if (o.proxyHeader !== undefined && trustProxy === false) warnings.emit("proxyHeaderIgnored");
  if (requestsServed && ++createdWhileServing === PER_REQUEST_THRESHOLD) warnings.emit("limiterPerRequest");

  const callHook = hookCaller(warnings);
  const rules = compileRules(o, {
    caseSensitive: o.caseSensitive ?? false,
    clock,
    formats: headerFormats(o.headers),
    baseStore: o.store ?? o.limiter?.store ?? memoryStore(),
    guard: storeGuard({ timeoutMs: o.timeoutMs, circuitBreaker: o.circuitBreaker, logger: o.logger ?? console }),
    failurePolicy: storeFailurePolicy(o.onStoreError, clock, callHook),
    warnings,
  });

  const allowIps: IpRange[] = [];
  const allowKeys = new Set<string>();
  for (const entry of o.allowList ?? []) {
    const range = parseRange(entry);
    if (range !== undefined) allowIps.push(range);
    else allowKeys.add(entry);
  }
  const succeeded = o.requestWasSuccessful;
  /** Whether a request that ended with `status` (0: the client left early) is a success; a throwing function says no. */
  const successful = (req: RateLimitRequest<Raw>, status: number): boolean => {
    if (status <= 0) return false;
    if (succeeded === undefined) return status < 400;
    return callHook("requestWasSuccessful", succeeded, req, status) === true;
  };
  const denyIps: IpRange[] = [];
  const denyKeys = new Set<string>();
  for (const entry of o.denyList ?? []) {
    const range = parseRange(entry);
    if (range !== undefined) denyIps.push(range);
    else denyKeys.add(entry);
  }
  /** A request the deny list refuses: 403, nothing counted, no rate-limit headers; seen by `onDecision`. */
  const refuse = (req: RequestView<Raw>, key: string, rule: string): RateLimitResult => {
    const info = new RequestRateLimitInfo({ decision: undefined, source: "denyList", storeError: undefined, atMs: clock() }, key, rule, 0);
    callHook("onDecision", o.onDecision, info, req);
    return new RateLimitResult(info, [], DENIED_RESPONSE, undefined);
  };
  const refundWhen = o.skipSuccessfulRequests || o.skipFailedRequests
    ? (req: RateLimitRequest<Raw>, status: number): boolean =>
      successful(req, status) ? o.skipSuccessfulRequests === true : o.skipFailedRequests === true
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

  /** The rule a handle call names, or an INVALID_ARGUMENT error listing the rules. */
  const ruleNamed = (name: string | undefined): CompiledRule<Raw> => {
    const rule = rules.byName(name ?? "default");
    if (rule !== undefined) return rule;
    throw new FloodgateError(
      "INVALID_ARGUMENT",
      `${WHERE}: no rule ${describeValue(name ?? "default")}${
        name === undefined ? " (no `rule` was given)" : ""
      }; this middleware's rules are ${rules.names.map((n) => JSON.stringify(n)).join(", ")}.`,
    );
  };
  /** The one limiter a handle call addresses. */
  const boundOf = (rule: CompiledRule<Raw>, policy: Policy | readonly Policy[] | undefined): BoundLimiter => {
    if (rule.bound !== undefined) return rule.bound;
    if (policy !== undefined) return rule.boundFor(policy);
    throw new FloodgateError(
      "INVALID_ARGUMENT",
      `${WHERE}: the policy of rule ${
        JSON.stringify(rule.name)
      } is a function of the request, so its counters are per policy set: pass \`policy\` (the set the function returns) to say which.`,
    );
  };
  const limiterOf = (options: HandleOptions | undefined): RateLimiter => boundOf(ruleNamed(options?.rule), options?.policy).limiter.limiter;

  /** What this middleware started after a decision and has not seen finish, for flush(); none of it rejects. */
  const started = new Set<Promise<unknown>>();
  const track = (work: Promise<unknown>): void => {
    started.add(work);
    const done = (): void => {
      started.delete(work);
    };
    work.then(done, done);
  };

  return {
    async reset(key, options) {
      const rule = ruleNamed(options?.rule);
      const bounds = rule.bound !== undefined || options?.policy !== undefined ? [boundOf(rule, options?.policy)] : [...rule.bounds()];
      for (const bound of bounds) await bound.limiter.reset(fitKey(key));
    },
    // async: a bad rule or a missing policy rejects, as a store failure does.
    peek: async (key, options) => limiterOf(options).peek(fitKey(key)),
    penalty: async (key, options) =>
      limiterOf(options).penalty(fitKey(key), options?.cost === undefined ? undefined : { cost: options.cost }),
    limiterFor: (rule, policy) => limiterOf({ rule, policy }),
    async flush() {
      while (started.size > 0) await Promise.allSettled([...started]);
      const flushes: Promise<void>[] = [];
      for (const name of rules.names) for (const bound of rules.byName(name)!.bounds()) flushes.push(bound.limiter.flush());
      await Promise.all(flushes);
    },
    async decideRequest(raw, peerIp, ipResolved = false) {
      requestsServed = true;
      const method = access.method(raw).toUpperCase();
      const path = access.path(raw);
      const client = clientOf(raw, peerIp, ipResolved);
      const req = new RequestView(raw, method, path, client === undefined ? undefined : formatIp(client), access);

      if (client !== undefined && denyIps.length > 0) {
        for (const range of denyIps) {
          if (inRange(client, range)) return refuse(req, groupIp(client, ipv6Subnet), rules.match(method, path)?.name ?? "default");
        }
      }
      if (o.skip !== undefined) {
        const skipped = o.skip(req);
        if (isThenable(skipped) ? await skipped : skipped) return undefined;
      }
      if (client !== undefined) { for (const range of allowIps) if (inRange(client, range)) return undefined; }
      const rule = rules.routed ? rules.match(method, path, caseSensitiveFor(raw)) : rules.match(method, path);
      if (rule === undefined) return undefined;

      let bound = rule.bound;
      if (bound === undefined) {
        const returned = called("policy", rule.policyOf!, req);
        const policies = isThenable(returned) ? await returned : returned;
        if (policies === undefined) return undefined;
        bound = rule.boundFor(policies);
      }

      const keyFunction = rule.key ?? o.key;
      const returnedKey = keyFunction === undefined ? undefined : called("key", keyFunction, req);
      const givenKey = isThenable(returnedKey) ? await returnedKey : returnedKey;
      const key = givenKey === undefined || givenKey === ""
        ? (client === undefined ? UNKNOWN_CLIENT_KEY : groupIp(client, ipv6Subnet))
        : fitKey(givenKey);
      if (denyKeys.size !== 0 && denyKeys.has(key)) return refuse(req, key, rule.name);
      if (allowKeys.has(key)) return undefined;

      const returnedCost = typeof rule.cost === "number" ? rule.cost : called("cost", rule.cost, req);
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
      // After the cost: a request of cost 0 is not counted, whatever its key.
      if (givenKey !== undefined && typeof givenKey !== "string") {
        throw new FloodgateError(
          "INVALID_ARGUMENT",
          `${WHERE}: the \`key\` function returned ${
            describeValue(givenKey)
          }; it must return a string, or undefined or "" for the client's address. The request was not counted.`,
        );
      }

      if (bound.watched < DOUBLE_COUNT_WATCH && typeof raw === "object" && raw !== null && warnings.pending("doubleCount")) {
        bound.watched++;
        if (bound.seen.has(raw)) warnings.emit("doubleCount", `rule ${rule.name}, key ${describeValue(key)}`);
        else bound.seen.add(raw);
      }

      const limiter = bound.limiter;
      const answer = bound.reserves ? limiter.reserve(key, cost, req) : limiter.consume(key, cost, req);
      const outcome: StoreOutcome = isThenable(answer) ? await answer : answer;
      const info = new RequestRateLimitInfo(outcome, key, rule.name, cost);
      const decision = outcome.decision;
      // Leased mode: a lease refresh this decision started is work after the response too.
      if (decision?.source === "lease") {
        info.wait(decision.pending);
        track(decision.pending);
      }
      const headers: string[] = [];
      if (decision !== undefined) bound.writeHeaders?.(decision, outcome.atMs, headers);
      const retryAfter = info.allowed ? 0 : limitedRetryAfter(decision, bound.policies, limiter.openForMs(outcome.atMs), outcome.atMs);
      if (!info.allowed) headers.push(RETRY_AFTER, `${retryAfter}`);

      // What the end of the response does, known now: `pending` waits for it from here on.
      const reservation = outcome.reservation;
      const end: RequestEnd | undefined = reservation !== undefined
        ? reservationEnd(
          limiter,
          { ...outcome, reservation },
          info,
          req,
          rule.actual,
          refundWhen && ((status) => refundWhen(req, status)),
          warnings,
        )
        : refundWhen !== undefined && info.allowed && decision !== undefined
        ? (status) => refundWhen(req, status) ? limiter.refund(outcome.source, key, cost, decision.charge) : undefined
        : undefined;
      const untilEnd = end === undefined ? undefined : info.untilEnd();
      const ended = untilEnd && ((work: Promise<void> | void) => {
        untilEnd(work);
        if (work !== undefined) track(work);
      });
      // The hooks first: a custom handler that throws fails the request, not the metrics of a denial.
      const decided = callHook("onDecision", o.onDecision, info, req);
      if (isThenable(decided)) {
        info.wait(decided);
        track(decided);
      }
      let response: PreparedResponse | undefined;
      if (!info.allowed) {
        const limited = callHook("onLimited", o.onLimited, info, req);
        if (isThenable(limited)) {
          info.wait(limited);
          track(limited);
        }
        const prepared = respond(req, info, headers, retryAfter);
        response = isThenable(prepared) ? await prepared : prepared;
      }
      return new RateLimitResult(info, headers, response, end, ended);
    },
  };
}
