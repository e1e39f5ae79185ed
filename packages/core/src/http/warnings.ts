/** Where Floodgate writes misconfiguration warnings (default `console`). */
export interface Logger {
  /** Receives one warning, prefixed `[floodgate] ` and starting with its code. */
  warn(message: string): void;
}

/**
 * Misconfigurations Floodgate detects, each reported once per middleware through the logger and
 * each switchable with `warnings: { <code>: false }`.
 */
export const WARNINGS = {
  /** A forwarding header arrived while `trustProxy` is false. */
  forwardedHeaderIgnored:
    "A request carries an X-Forwarded-For or Forwarded header, but trustProxy is false, so Floodgate keys requests by the socket address: behind a proxy, every client shares the proxy's one limit. If the app runs behind a proxy, set trustProxy to the number of proxy hops, the proxies' addresses or CIDR ranges, or a preset such as \"cloudflare\"; if it does not, the header is forged and ignoring it is right: turn this warning off with warnings: { forwardedHeaderIgnored: false }.",
  /** `trustProxy: true` lets any client choose its own key. */
  trustProxyTrue:
    "trustProxy: true trusts every entry of X-Forwarded-For, so any client can choose its own key (and escape its limit) by sending that header. Set trustProxy to the number of proxy hops in front of the app, or to the proxies' addresses or CIDR ranges.",
  /** A preset's header came from a peer outside the platform's ranges and was ignored. */
  untrustedPresetPeer:
    "A trustProxy preset's header came from a peer outside the platform's proxy ranges, so it was ignored and the peer's own address is the key. " +
    "Make the origin reachable only through the platform; if a proxy of yours sits between the platform and this server, add its address to trustProxy: { preset, ranges }.",
  /** A preset whose platform publishes no ranges believes its header from any peer. */
  presetWithoutRanges:
    "This trustProxy preset's platform publishes no proxy ranges, so its header is believed from any peer, and a client reaching the origin directly can pick its own key. " +
    "Make the origin reachable only through the platform, or list the platform's proxy addresses in trustProxy: { preset, ranges }.",
  /** A client address is not a valid IP address. */
  invalidIp:
    "A client address is not a valid IP address (a forged or malformed proxy header, or a proxy that writes something else there), so the request is keyed by the nearest valid address before it. Check what the proxy writes into the header set by proxyHeader.",
  /** A request has no client address, so such requests share one key. */
  noClientIp:
    "A request has no client address, so all such requests share one key and one limit. Pass the address to Floodgate: set trustProxy if a proxy puts it in a header, getClientIp for withRateLimit, or getConnInfo for the Hono middleware; or give a key function that does not depend on the address.",
  /** `proxyHeader` was given, but no trusted proxy is configured, so no header is read at all. */
  proxyHeaderIgnored:
    "proxyHeader is set, but trustProxy is not, so Floodgate reads no proxy header at all and keys requests by the socket address (Express and Koa: by req.ip / ctx.ip, which follow the app's own \"trust proxy\" / app.proxy setting and read only X-Forwarded-For). Set trustProxy (the number of proxy hops, the proxies' addresses or CIDR ranges, or a preset) for proxyHeader to take effect, or remove proxyHeader.",
  /** Many limiters were created while serving requests (one per request limits nothing). */
  limiterPerRequest:
    "Many rate limiters were created while requests were being served: a limiter created per request starts from zero each time and limits nothing. Create the middleware once, at startup, and reuse it for every request.",
  /** A `policy` function builds new policy objects per request, or returns more distinct sets than a rule keeps. */
  policyPerRequest:
    "A policy function returns policy objects built per request (or more distinct policy sets than one rule keeps a limiter for, 1000): each call to a policy factory makes a new policy, and each distinct set counts in a namespace of its own. Build the policies once, at startup (const PLANS = { free: fixedWindow(...), pro: fixedWindow(...) }), and return those.",
  /** One request was counted twice on the same store and prefix. */
  doubleCount:
    "One request was counted twice by limiters on the same store and prefix, so clients get half their quota. The middleware is probably mounted twice (app-wide and on a route); mount it once, or give the second one its own prefix.",
} as const;

/** A warning's code. */
export type WarningCode = keyof typeof WARNINGS;

/** Turns all warnings on/off, or some of them by code. */
export type WarningsOption = boolean | Partial<Record<WarningCode, boolean>>;

/** Emits each enabled warning at most once. */
export class Warnings {
  readonly #pending: Set<WarningCode>;

  /**
   * Enables the warnings `option` leaves on (all of them when it is `undefined`).
   *
   * @param logger Where the warnings are written.
   */
  constructor(option: WarningsOption | undefined, readonly logger: Logger) {
    this.#pending = new Set(
      (Object.keys(WARNINGS) as WarningCode[]).filter((c) => option !== false && (typeof option !== "object" || option[c] !== false)),
    );
  }

  /** True while `code` is enabled and has not been emitted yet. */
  pending(code: WarningCode): boolean {
    return this.#pending.has(code);
  }

  /** Logs the warning `code` (with `detail` appended) the first time, and nothing after. */
  emit(code: WarningCode, detail?: string): void {
    if (this.#pending.delete(code)) this.log(`${code}: ${WARNINGS[code]}${detail === undefined ? "" : ` (${detail})`}`);
  }

  /** Writes `[floodgate] <message>` to the logger; a broken logger must not break the request. */
  log(message: string): void {
    try {
      this.logger.warn(`[floodgate] ${message}`);
    } catch {
      // ignored
    }
  }
}
