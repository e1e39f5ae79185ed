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
    "A request carries X-Forwarded-For or Forwarded but trustProxy is false: all clients behind that proxy share one limit. Behind a proxy, set trustProxy (a hop count, the proxies' addresses, or a preset like \"cloudflare\").",
  trustProxyTrue:
    "trustProxy: true trusts every X-Forwarded-For entry: any client can pick its own key. Set the proxy hop count or the proxies' addresses instead.",
  invalidIp:
    "A client address is not an IP (a forged or malformed proxy header?): the request was keyed by the nearest valid hop.",
  noClientIp:
    "No client address (no socket address, no trusted proxy header): such requests share one key. Set trustProxy, or pass getClientIp (fetch) / getConnInfo (Hono).",
  limiterPerRequest:
    "Many limiters were created while serving requests: one created per request counts nothing. Create the middleware once at startup.",
  doubleCount:
    "One limiter counted the same request twice (the middleware is mounted twice, or two share one store and prefix): clients get half their quota.",
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
