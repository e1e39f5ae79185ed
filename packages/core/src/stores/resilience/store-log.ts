import type { FloodgateError } from "../../errors.ts";
import type { StoreLogger } from "./options.ts";

/**
 * The lines a resilient store (../resilient-store.ts) writes: one when its store starts failing
 * (or, before its first answer, times out), one when it answers again. Never more per episode.
 */
export class StoreLog {
  constructor(readonly name: string, readonly logger: StoreLogger | undefined) {}

  /** The first timeout before the store's first answer, `afterMs` after the first call. */
  coldTimeout(afterMs: number, error: FloodgateError): void {
    this.#write(
      "warn",
      `The ${this.name} store has not answered yet (${error.message}, ${
        Math.max(0, afterMs)
      } ms after the first call); until it does, one call at a time is sent. Check its address and that it is reachable.`,
    );
  }

  /** The first answer, `afterMs` after the timeout {@link coldTimeout} reported. */
  firstAnswer(afterMs: number): void {
    this.#write("info", `The ${this.name} store answered, ${Math.max(0, afterMs)} ms after a first call timed out.`);
  }

  failing(error: FloodgateError): void {
    this.#write(
      "warn",
      `The ${this.name} store is failing (${error.code}: ${error.message}). Calls fail until it answers again, and limits follow the store-failure policy meanwhile. ` +
        "Check that the store is reachable from this process, and its address, credentials and load.",
    );
  }

  recovered(afterMs: number, failed: number): void {
    this.#write(
      "info",
      `The ${this.name} store answers again, after failing for ${Math.max(0, afterMs)} ms; ${failed} ${
        failed === 1 ? "call" : "calls"
      } failed meanwhile.`,
    );
  }

  #write(level: "warn" | "info", message: string): void {
    const logger = this.logger;
    if (logger === undefined) return;
    try {
      if (level === "info" && typeof logger.info === "function") logger.info(`[floodgate] ${message}`);
      else logger.warn(`[floodgate] ${message}`);
    } catch {
      // A broken logger must not break the call.
    }
  }
}
