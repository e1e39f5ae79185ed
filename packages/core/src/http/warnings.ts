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
    "X-Forwarded-For/Forwarded ignored (trustProxy is false): clients behind a proxy share one limit. Set trustProxy.",
  trustProxyTrue:
    "trustProxy: true lets any client pick its key through X-Forwarded-For. Set a hop count or the proxies' addresses.",
  untrustedPresetPeer:
    "A trustProxy preset's header came from a peer outside the platform's proxy ranges, so it was ignored and the peer's own address is the key. " +
    "Make the origin reachable only through the platform; if a proxy of yours sits between the platform and this server, add its address to trustProxy: { preset, ranges }.",
  presetWithoutRanges:
    "This trustProxy preset's platform publishes no proxy ranges, so its header is believed from any peer, and a client reaching the origin directly can pick its own key. " +
    "Make the origin reachable only through the platform, or list the platform's proxy addresses in trustProxy: { preset, ranges }.",
  invalidIp:
    "A client address is not an IP (a forged or malformed proxy header?): keyed by the nearest valid hop.",
  noClientIp:
    "No client address: such requests share one key. Set trustProxy, or getClientIp (fetch) / getConnInfo (Hono).",
  limiterPerRequest:
    "Limiters created while serving requests count nothing: create the middleware once, at startup.",
  doubleCount:
    "One limiter counted a request twice (middleware mounted twice, or a shared store and prefix): clients get half their quota.",
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
