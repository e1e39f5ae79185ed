/** Where Floodgate writes misconfiguration warnings (default `console`). */
export interface Logger {
  warn(message: string): void;
}

/**
 * Misconfigurations Floodgate detects, each reported once per middleware through the logger and
 * each switchable with `warnings: { <code>: false }`.
 */
export const WARNINGS = {
  forwardedHeaderIgnored:
    "A request carries X-Forwarded-For or Forwarded, but trustProxy is false: every client behind that proxy shares the proxy's limit. If this app runs behind a proxy, set trustProxy (a hop count, the proxies' addresses, or a preset such as \"cloudflare\").",
  trustProxyTrue:
    "trustProxy: true trusts every X-Forwarded-For entry, so any client can pick its own key by sending the header. Set the number of proxy hops or the proxies' addresses instead.",
  invalidIp:
    "A client address is not an IP address (a forged or malformed proxy header, or a misconfigured socket): the request was keyed by the nearest valid hop.",
  noClientIp:
    "No client address was available (no socket address and no trusted proxy header): all such requests share one key. Pass getClientIp / getConnInfo, or set trustProxy.",
  limiterPerRequest:
    "Many rate limiters were created after requests started being served: a limiter created per request counts nothing. Create the middleware once, at startup.",
  doubleCount:
    "The same request was counted twice by one limiter (the middleware is mounted twice, or two middlewares share one store and prefix): clients get half their quota.",
} as const;

/** A warning's code. */
export type WarningCode = keyof typeof WARNINGS;

/** Turns all warnings on/off, or some of them by code. */
export type WarningsOption = boolean | Partial<Record<WarningCode, boolean>>;

/** Emits each enabled warning at most once. */
export class Warnings {
  readonly #pending: Set<WarningCode>;

  constructor(option: WarningsOption | undefined, readonly logger: Logger) {
    this.#pending = new Set(
      (Object.keys(WARNINGS) as WarningCode[]).filter((c) => option !== false && (typeof option !== "object" || option[c] !== false)),
    );
  }

  /** True while `code` is enabled and has not been emitted yet. */
  pending(code: WarningCode): boolean {
    return this.#pending.has(code);
  }

  emit(code: WarningCode, detail?: string): void {
    if (!this.#pending.delete(code)) return;
    try {
      this.logger.warn(`[floodgate] ${code}: ${WARNINGS[code]}${detail === undefined ? "" : ` (${detail})`}`);
    } catch {
      // A broken logger must not break the request.
    }
  }
}
