import {
  type CallSignal,
  type EvaluateMode,
  FloodgateError,
  type LeaseRequest,
  type PolicySet,
  type ReservationArgs,
  type StoreResult,
} from "@floodgate/core/store";

/** One store call waiting for its item: what to evaluate, and where its answer goes. */
export interface Operation {
  readonly set: PolicySet;
  readonly key: string;
  readonly cost: number;
  readonly nowMs: number;
  readonly mode: EvaluateMode;
  readonly marks?: readonly number[] | undefined;
  readonly reservation?: ReservationArgs | undefined;
  readonly lease?: LeaseRequest | undefined;
  readonly signal?: CallSignal | undefined;
}

interface Waiting extends Operation {
  resolve(result: StoreResult): void;
  reject(error: unknown): void;
}

/**
 * Group commit per item: while a write of an item is in flight, the calls on that item wait; when
 * it ends, all of them are decided together, in arrival order, on the state that write left, and
 * committed with one conditional write. An instance's calls on one key then never race each other
 * (each would cost the others a failed write), and a burst of N calls costs one request, not N.
 * `decide` answers one result per operation, all taking effect at its one write.
 */
export function batcher(decide: (item: string, operations: readonly Operation[]) => Promise<StoreResult[]>) {
  /** Per item being written: the calls that arrived meanwhile. */
  const waiting = new Map<string, Waiting[]>();

  async function drive(item: string, batch: Waiting[]): Promise<void> {
    for (;;) {
      // A call its caller abandoned before its turn is not charged.
      const live = batch.filter((op) => {
        if (!op.signal?.aborted) return true;
        op.reject(new FloodgateError("STORE_TIMEOUT", `dynamoDBStore: ${op.mode} of ${JSON.stringify(op.key)} abandoned by its caller.`));
        return false;
      });
      if (live.length > 0) {
        try {
          const results = await decide(item, live);
          live.forEach((op, i) => op.resolve(results[i]!));
        } catch (error) {
          for (const op of live) op.reject(error);
        }
      }
      const next = waiting.get(item)!;
      if (next.length === 0) {
        waiting.delete(item);
        return;
      }
      waiting.set(item, []);
      batch = next;
    }
  }

  return (item: string, operation: Operation): Promise<StoreResult> =>
    new Promise<StoreResult>((resolve, reject) => {
      const op: Waiting = { ...operation, resolve, reject };
      const queue = waiting.get(item);
      if (queue !== undefined) {
        queue.push(op);
        return;
      }
      waiting.set(item, []);
      void drive(item, [op]);
    });
}
