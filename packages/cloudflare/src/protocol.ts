import type { LeaseRequest, Policy, ReservationArgs } from "@floodgate/core/store";

/** What a store call asks the object to do: an `evaluateState` mode, or deleting the key's state. */
export type ObjectOperation =
  | "consume"
  | "peek"
  | "refund"
  | "penalty"
  | "block"
  | "unblock"
  | "reserve"
  | "settle"
  | "lease"
  | "reset";

/**
 * One store call, as it travels over RPC to the object holding the key. Policies travel as their
 * plain fields; the object revives them (`revivePolicy`).
 */
export interface ObjectCall {
  /** What to do. */
  readonly op: ObjectOperation;
  /** The limiter's namespace. */
  readonly prefix: string;
  /** The policy set, as plain fields. */
  readonly policies: readonly Policy[];
  /** The identifier. */
  readonly key: string;
  /** Units (a block's duration in ms). */
  readonly cost: number;
  /** The caller's time (epoch ms) when the store runs on the caller's clock; absent: the object's clock. */
  readonly nowMs?: number;
  /** A refund's charge marks. */
  readonly marks?: readonly number[];
  /** A reservation to record or settle. */
  readonly reservation?: ReservationArgs;
  /** A leased decision's request. */
  readonly lease?: LeaseRequest;
}
