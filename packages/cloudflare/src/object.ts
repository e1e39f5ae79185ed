import { DurableObject } from "cloudflare:workers";
import { type EvaluateMode, evaluateState, FloodgateError, type PolicySet, revivePolicy } from "@floodgate/core/store";
import type { ObjectState } from "./object-state.ts";
import type { ObjectCall, ObjectOperation } from "./protocol.ts";
import { StateTable } from "./state-table.ts";

const MODES: ReadonlySet<ObjectOperation> = new Set([
  "consume",
  "peek",
  "refund",
  "penalty",
  "block",
  "unblock",
  "reserve",
  "settle",
  "lease",
]);

/** Policy sets seen recently, revived once: a limiter sends the same set with every call. */
const MAX_CACHED_SETS = 256;

/**
 * The Durable Object that holds rate-limit state: bind it in your Worker (export it from the
 * Worker's module and declare it under `new_sqlite_classes` in the migrations), and hand the
 * binding to {@link durableObjectStore}. Each object decides for the keys routed to it with
 * `evaluateState`, the same code as the memory store, on state kept in its SQLite storage; its
 * alarm deletes keys once they expire.
 *
 * @example
 * export { RateLimiterObject } from "@floodgate/cloudflare";
 */
export class RateLimiterObject extends DurableObject {
  readonly #table: StateTable;
  readonly #sets = new Map<string, PolicySet>();

  /** Called by the runtime. */
  constructor(ctx: ObjectState, env: unknown) {
    super(ctx, env);
    this.#table = new StateTable(ctx);
  }

  /**
   * Runs one store call (RPC, from {@link durableObjectStore}) and answers the store result:
   * `evaluateState`'s for the key's stored state, on the caller's clock when the call carries
   * `nowMs`, else on the object's. Reading, deciding and writing await nothing, so concurrent
   * calls are decided one after the other.
   */
  async decide(call: ObjectCall): Promise<readonly number[]> {
    const clockMs = Date.now();
    const row = JSON.stringify([call.prefix, call.key]);
    if (call.op === "reset") {
      this.#table.delete(row);
      return [];
    }
    if (!MODES.has(call.op)) {
      throw new FloodgateError(
        "INVALID_ARGUMENT",
        `RateLimiterObject: unknown operation ${JSON.stringify(call.op)}.`,
      );
    }
    const set = this.#setOf(call.prefix, call.policies);
    const nowMs = call.nowMs ?? clockMs;
    const stored = this.#table.read(row, clockMs);
    const evaluation = evaluateState(
      set,
      stored === undefined ? undefined : JSON.parse(stored.value),
      call.cost,
      nowMs,
      call.op as EvaluateMode,
      call.marks,
      call.reservation,
      call.lease,
    );
    if (evaluation.changed) {
      if (evaluation.state === undefined) this.#table.delete(row);
      else {
        // Expiry moves to the object's clock as a duration: a caller's clock may be far from it.
        // Unblocking keeps it (the call carries no time of the caller's to measure from).
        const expiresAt = call.op === "unblock" && stored !== undefined
          ? stored.expiresAt
          : clockMs + Math.max(1, Math.ceil(evaluation.expiresAtMs - nowMs));
        const pending = this.#table.write(row, JSON.stringify(evaluation.state), expiresAt);
        if (pending !== undefined) await pending;
      }
    }
    return evaluation.result;
  }

  /** How many keys this object holds (expired ones its alarm has yet to delete included). */
  keyCount(): number {
    return this.#table.size();
  }

  /** Times this instance of the object has run its alarm (it restarts at 0 when the object is evicted). */
  alarmRuns(): number {
    return this.#table.alarms;
  }

  /** Called by the runtime when the alarm rings: deletes the expired keys. */
  async alarm(): Promise<void> {
    await this.#table.expire(Date.now());
  }

  #setOf(prefix: string, policies: readonly unknown[]): PolicySet {
    const id = JSON.stringify([prefix, policies]);
    let set = this.#sets.get(id);
    if (set === undefined) {
      if (!Array.isArray(policies) || policies.length === 0) {
        throw new FloodgateError(
          "INVALID_ARGUMENT",
          "RateLimiterObject: a call without policies; expected a non-empty array of policies.",
        );
      }
      set = Object.freeze({
        prefix,
        policies: Object.freeze(policies.map(revivePolicy)),
      });
      if (this.#sets.size >= MAX_CACHED_SETS) this.#sets.clear();
      this.#sets.set(id, set);
    }
    return set;
  }
}
