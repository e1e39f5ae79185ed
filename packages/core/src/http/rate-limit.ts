import { describeValue, FloodgateError } from "../errors.ts";
import { memoryStore } from "../stores/memory-store.ts";
import { isThenable } from "../stores/store.ts";
import { createClientIpResolver } from "./client-ip.ts";
import { createHandle, type RateLimitHandle } from "./handle.ts";
import { concluding } from "./conclude.ts";
import { hookCaller } from "./hooks.ts";
import { formatIp, groupIp, inRange, type IpRange, type ParsedIp, parseIp, parseRange } from "./ip.ts";
import { called, fitKey } from "./keys.ts";
import {
  type AdapterOptions,
  headerFormats,
  type HttpRateLimitOptions,
  parseHttpOptions,
  type RateLimitRequest,
  type RequestAccess,
  WHERE,
} from "./options.ts";
import { watchCreation } from "./per-request.ts";
import type { SkipReason } from "./info.ts";
import { createResponder, REFUSED_RESPONSE } from "./response.ts";
import { RateLimitResult, RequestRateLimitInfo, RequestView } from "./result.ts";
import { type CompiledRule, compileRules, type RuleLimiter } from "./rules.ts";
import { runSteps, type Steps } from "./steps.ts";
import { resilientStores, storeErrorHandling } from "./store-errors.ts";
import { Warnings } from "./warnings.ts";

export { fitKey } from "./keys.ts";
export { createHandle, type HandleOptions, type RateLimitHandle, withHandle } from "./handle.ts";

// The per-request decision: construction validates and compiles everything once; `decideRequest`
// then reads the request's facts once each and builds its result in one step.

/** The core of every Floodgate middleware; adapters translate to and from it. */
export interface HttpRateLimiter<Raw> extends RateLimitHandle {
  /**
   * Decides for one request. `undefined` means not limited at all (skipped, allow-listed, or no
   * rule applies): continue without headers. Never rejects because of the store.
   * @param peerIp - the connection's peer address (or, when `ipResolved`, the client address itself)
   * @param ipResolved - the address was already resolved through trusted proxies (e.g. Express's `req.ip`)
   */
  decideRequest(raw: Raw, peerIp: string | undefined, ipResolved?: boolean): Promise<RateLimitResult | undefined>;
  /**
   * {@link decideRequest}, without a promise when nothing it waits for is pending (the memory
   * store, synchronous callbacks): the result itself, else a promise of it. Throws what
   * `decideRequest` rejects with. What the adapters call, to spare a promise and a microtask per request.
   */
  decide(raw: Raw, peerIp: string | undefined, ipResolved?: boolean): RateLimitResult | undefined | Promise<RateLimitResult | undefined>;
}

/** A decision: the result (`undefined`: not limited at all), or a promise of it. */
type Decided = RateLimitResult | undefined | Promise<RateLimitResult | undefined>;

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
  let firstDecision: (() => void) | undefined = watchCreation(warnings);

  const callHook = hookCaller(warnings);
  const rules = compileRules(o, {
    caseSensitive: o.caseSensitive ?? false,
    clock,
    formats: headerFormats(o.headers),
    baseStore: o.store ?? o.limiter?.store ?? memoryStore(),
    resilient: resilientStores({
      timeoutMs: o.timeoutMs,
      circuitBreaker: o.circuitBreaker,
      logger: o.logger ?? console,
      events: o.storeEvents,
    }),
    onStoreError: storeErrorHandling(o.onStoreError, clock, callHook),
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
    return new RateLimitResult(info, [], REFUSED_RESPONSE, undefined);
  };
  const refundWhen = o.skipSuccessfulRequests || o.skipFailedRequests
    ? (req: RateLimitRequest<Raw>, status: number): boolean =>
      successful(req, status) ? o.skipSuccessfulRequests === true : o.skipFailedRequests === true
    : undefined;
  const respond = createResponder(o);
  /** A request not counted at all: `onSkipped` sees it, with why. */
  const notCounted = (req: RateLimitRequest<Raw>, reason: SkipReason): undefined => {
    if (o.onSkipped !== undefined) callHook("onSkipped", o.onSkipped, req, reason);
    return undefined;
  };

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
  // The socket's address alone names the client (no proxy to trust), or the framework resolved it:
  // the client is the address parsed, and the last one parsed is kept. Consecutive requests often
  // come from one address (a keep-alive connection, a proxy in front), read as the same string.
  const fromPeerOnly = trustProxy === false || trustProxy === 0;
  let lastPeer: string | undefined;
  let lastClient: ParsedIp | undefined;
  const clientOf = (raw: Raw, peerIp: string | undefined, ipResolved: boolean): ParsedIp | undefined => {
    let client: ParsedIp | undefined;
    let invalidIp: string | undefined;
    if (peerIp === lastPeer && peerIp !== undefined && (ipResolved || fromPeerOnly)) client = lastClient;
    else if (ipResolved) {
      client = peerIp === undefined ? undefined : parseIp(peerIp);
      if (client === undefined) invalidIp = peerIp;
    } else {
      const found = resolveIp(peerIp, raw, access.header);
      client = found.ip;
      invalidIp = found.invalid;
    }
    if (invalidIp !== undefined) warnings.emit("invalidIp", `received ${describeValue(invalidIp)}`);
    if (client === undefined) warnings.emit("noClientIp");
    else if (peerIp !== undefined && (ipResolved || fromPeerOnly)) {
      lastPeer = peerIp;
      lastClient = client;
    }
    if (trustProxy === false && !ipResolved && forwardedWatched < FORWARDED_WATCH && warnings.pending("forwardedHeaderIgnored")) {
      forwardedWatched++;
      if (access.header(raw, "x-forwarded-for") !== undefined || access.header(raw, "forwarded") !== undefined) {
        warnings.emit("forwardedHeaderIgnored");
      }
    }
    return client;
  };

  /** What this middleware started after a decision and has not seen finish, for flush(); none of it rejects. */
  const started = new Set<Promise<unknown>>();
  const track = (work: Promise<unknown>): void => {
    started.add(work);
    const done = (): void => {
      started.delete(work);
    };
    work.then(done, done);
  };

  const conclude = concluding(o, callHook, track, refundWhen, respond, warnings);
  const ruleFor = (raw: Raw, method: string, path: string) =>
    rules.routed ? rules.match(method, path, caseSensitiveFor(raw)) : rules.match(method, path);
  const keyLists = denyKeys.size + allowKeys.size > 0;
  const keyOfClient = (client: ParsedIp | undefined): string => client === undefined ? UNKNOWN_CLIENT_KEY : groupIp(client, ipv6Subnet);
  const allowedIp = (client: ParsedIp | undefined): boolean => {
    if (client !== undefined) { for (const range of allowIps) if (inRange(client, range)) return true; }
    return false;
  };

  // A decision reads the request's facts, then, when no callback of the options may have to be
  // waited for before the store (no `skip`, one limiter, no key function, a fixed cost: the
  // usual case), charges in the same call; else its steps are a generator, each `yield` waiting
  // for a promise as `await` would (see steps.ts). Either goes on in `charge` and `conclude`.
  const decide = (raw: Raw, peerIp: string | undefined, ipResolved = false): Decided => {
    if (firstDecision !== undefined) {
      firstDecision();
      firstDecision = undefined;
    }
    const given = access.method(raw);
    // Node's parser and fetch's Request give these as the same upper-case strings: no copy to make.
    const method = given === "GET" || given === "POST" ? given : given.toUpperCase();
    const path = access.path(raw);
    const client = clientOf(raw, peerIp, ipResolved);
    const req = new RequestView(raw, method, path, client === undefined ? undefined : formatIp(client), access);

    if (client !== undefined && denyIps.length > 0) {
      for (const range of denyIps) {
        if (inRange(client, range)) return refuse(req, groupIp(client, ipv6Subnet), rules.match(method, path)?.name ?? "default");
      }
    }
    if (o.skip !== undefined) return slowly(raw, req, client);
    if (allowedIp(client)) return notCounted(req, "allowList");
    const rule = ruleFor(raw, method, path);
    if (rule === undefined) return notCounted(req, "noRule");
    const counted = rule.single;
    return counted === undefined || (rule.key ?? o.key) !== undefined || typeof rule.cost !== "number" || keyLists
      ? slowly(raw, req, client)
      : charge(raw, req, rule, counted, keyOfClient(client), undefined, rule.cost);
  };

  // A promise a generator's step resolves to, or its value is, is flattened as `await` would: a decision still.
  const slowly = (raw: Raw, req: RequestView<Raw>, client: ParsedIp | undefined): Decided => runSteps(steps(raw, req, client)) as Decided;

  // From the `skip` callback on, for options with callbacks (the allow list and the rule are
  // looked up again: the same answer, from the same facts).
  function* steps(raw: Raw, req: RequestView<Raw>, client: ParsedIp | undefined): Steps<Decided> {
    if (o.skip !== undefined) {
      const skipped = o.skip(req);
      if (isThenable(skipped) ? yield skipped : skipped) return notCounted(req, "skip");
    }
    if (allowedIp(client)) return notCounted(req, "allowList");
    const rule = ruleFor(raw, req.method, req.path);
    if (rule === undefined) return notCounted(req, "noRule");

    let counted = rule.single;
    if (counted === undefined) {
      const returned = called("policy", rule.policyOf!, req);
      const policies = isThenable(returned) ? yield returned : returned;
      if (policies === undefined) return notCounted(req, "noRule");
      counted = rule.limiterFor(policies);
    }

    const keyFunction = rule.key ?? o.key;
    const returnedKey = keyFunction === undefined ? undefined : called("key", keyFunction, req);
    const givenKey = (isThenable(returnedKey) ? yield returnedKey : returnedKey) as Awaited<typeof returnedKey>;
    const key = givenKey === undefined || givenKey === "" ? keyOfClient(client) : fitKey(givenKey);
    if (denyKeys.size !== 0 && denyKeys.has(key)) return refuse(req, key, rule.name);
    if (allowKeys.size !== 0 && allowKeys.has(key)) return notCounted(req, "allowList");

    const returnedCost = typeof rule.cost === "number" ? rule.cost : called("cost", rule.cost, req);
    const cost = (isThenable(returnedCost) ? yield returnedCost : returnedCost) as Awaited<typeof returnedCost>;
    return charge(raw, req, rule, counted, key, givenKey, cost);
  }

  /** Checks the cost (and the key a key function gave), then charges it: the result, or a promise of it. */
  const charge = (
    raw: Raw,
    req: RequestView<Raw>,
    rule: CompiledRule<Raw>,
    counted: RuleLimiter,
    key: string,
    givenKey: unknown,
    cost: unknown,
  ): Decided => {
    // The limiter's own bound too, so the error names the cost function rather than contradicting itself.
    if (typeof cost !== "number" || !Number.isInteger(cost) || cost < 0 || cost > Number.MAX_SAFE_INTEGER) {
      throw new FloodgateError(
        "INVALID_ARGUMENT",
        `${WHERE}: the \`${rule.costName}\` function returned ${
          describeValue(cost)
        }; it must return a whole number from 0 to 9007199254740991 (0: the request is not counted).`,
      );
    }
    if (cost === 0) return notCounted(req, "zeroCost");
    // After the cost: a request of cost 0 is not counted, whatever its key.
    if (givenKey !== undefined && typeof givenKey !== "string") {
      throw new FloodgateError(
        "INVALID_ARGUMENT",
        `${WHERE}: the \`key\` function returned ${
          describeValue(givenKey)
        }; it must return a string, or undefined or "" for the client's address. The request was not counted.`,
      );
    }

    if (counted.watched < DOUBLE_COUNT_WATCH && typeof raw === "object" && raw !== null && warnings.pending("doubleCount")) {
      counted.watched++;
      if (counted.seen.has(raw)) warnings.emit("doubleCount", `rule ${rule.name}, key ${describeValue(key)}`);
      else counted.seen.add(raw);
    }

    const limiter = counted.limiter;
    const answer = counted.reserves ? limiter.reserve(key, cost, req) : limiter.consume(key, cost, req);
    return isThenable(answer)
      ? answer.then((outcome) => conclude(req, rule, counted, key, cost, outcome))
      : conclude(req, rule, counted, key, cost, answer);
  };

  return {
    ...createHandle(rules, started),
    decide,
    async decideRequest(raw, peerIp, ipResolved) {
      return decide(raw, peerIp, ipResolved);
    },
  };
}
