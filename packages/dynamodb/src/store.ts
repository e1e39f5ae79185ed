import {
  type AttributeValue,
  ConditionalCheckFailedException,
  DeleteItemCommand,
  GetItemCommand,
  PutItemCommand,
  TransactWriteItemsCommand,
} from "@aws-sdk/client-dynamodb";
import {
  type CallSignal,
  type EvaluateMode,
  evaluateState,
  FloodgateError,
  type LeaseRequest,
  type ManyCall,
  type PolicySet,
  type RateLimitStore,
  type ReservationArgs,
  type StoreResult,
} from "@floodgate/core/store";
import { type Operation as RequestName, storeError } from "./errors.ts";
import { createHash } from "node:crypto";
import { batcher, type Operation } from "./batch.ts";
import { ASSUMED_ABSENT, itemKey, type Seen, SeenCache, seenOf, STATE, VERSION } from "./items.ts";
import { type DynamoDBStoreOptions, parseStoreOptions } from "./options.ts";
import { consumeMany, type Transacted, type TransactPut } from "./many.ts";

export type { DynamoDBStoreOptions } from "./options.ts";

export type { DynamoDBClientLike } from "./options.ts";

/** Requests the store sent and what they cost, since it was created (or `stats.reset()`). */
export interface DynamoDBStoreStats {
  /** Requests sent to DynamoDB (reads and writes, failed conditions included). */
  requests: number;
  /** Conditional writes refused because another instance had written first. */
  conflicts: number;
  /** Consistent reads (GetItem). */
  reads: number;
  /** Capacity units DynamoDB reported consumed (`ReturnConsumedCapacity: "TOTAL"`). */
  capacityUnits: number;
  /** Sets every figure back to 0. */
  reset(): void;
}

/** What {@link dynamoDBStore} returns: a store, with its request counters. */
export interface DynamoDBStore extends RateLimitStore {
  /** Requests and capacity this store has used. */
  readonly stats: DynamoDBStoreStats;
  /**
   * Every pair of a compound decision in one `TransactWriteItems` (see {@link RateLimitStore.consumeMany});
   * `undefined` where the server has no transactions (an emulator without them).
   */
  consumeMany(calls: readonly ManyCall[], cost: number, nowMs: number, signal?: CallSignal): Promise<StoreResult[] | undefined>;
}

/** Capacity as DynamoDB reports it. */
type Capacity = { CapacityUnits?: number };

const sha256 = (text: string): string => createHash("sha256").update(text).digest("hex");

/** A conditional write's outcome. */
type Written = { ok: true; seen: Seen } | { ok: false; current: Seen | undefined };

/** How many times one operation decides again after losing a race before giving up. */
const MAX_ATTEMPTS = 200;
/** Longest pause between two attempts on a contended key, ms. */
const MAX_PAUSE_MS = 50;

const pause = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A rate-limit store on one DynamoDB table. All of a key's policies live in one item; a decision
 * is one conditional `PutItem` on the item's version, computed by `evaluateState` on the state
 * the instance saw last (or assumed absent): when another instance wrote first, the failed
 * condition returns the current item (`ReturnValuesOnConditionCheckFailure: "ALL_OLD"`) and the
 * store decides again on it, with no separate read. A denial writes nothing. Decisions use the
 * instances' clocks (DynamoDB has none to offer); each algorithm keeps its own anchors (a
 * window's start, a bucket's arrival time), so an instance whose clock lags never reopens what one
 * ahead of it closed: a skew of δ shifts the schedule by at most δ (docs/aws-lambda-and-dynamodb.md).
 *
 * @example
 * import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
 * const store = dynamoDBStore({ client: new DynamoDBClient({}), table: "rate-limits" });
 * const limiter = createRateLimiter({ policy: slidingWindow({ limit: 100, window: "1m" }), store });
 */
export function dynamoDBStore(options: DynamoDBStoreOptions): DynamoDBStore {
  const o = parseStoreOptions(options);
  const { client, table } = o;
  const cache = new SeenCache(o.cacheSize);
  // Versions are unique per write: an instance prefix and a counter, so a state deleted and
  // written again never repeats a version an instance remembers (no ABA).
  const instance = Math.random().toString(36).slice(2, 10);
  let written = 0;
  const stats: DynamoDBStoreStats = {
    requests: 0,
    conflicts: 0,
    reads: 0,
    capacityUnits: 0,
    reset() {
      stats.requests =
        stats.conflicts =
        stats.reads =
        stats.capacityUnits =
          0;
    },
  };
  const keyOf = (set: PolicySet, key: string): string => itemKey(set.prefix, key, sha256);
  const counted = (output: { ConsumedCapacity?: Capacity | readonly Capacity[] | undefined }): void => {
    // A transaction reports one figure per table.
    const all = output.ConsumedCapacity;
    for (const c of Array.isArray(all) ? all : [all]) stats.capacityUnits += (c as Capacity | undefined)?.CapacityUnits ?? 0;
  };

  async function send<T extends { ConsumedCapacity?: Capacity | readonly Capacity[] | undefined }>(
    command: unknown,
    operation: RequestName,
  ): Promise<T> {
    stats.requests++;
    try {
      const output = await client.send(command) as T;
      counted(output);
      return output;
    } catch (error) {
      const name = (error as Error)?.name;
      if (error instanceof ConditionalCheckFailedException || name === "ConditionalCheckFailedException") throw error;
      if (name === "TransactionCanceledException" || name === "UnknownOperationException") throw error;
      throw storeError(error, table, operation);
    }
  }

  async function read(k: string): Promise<Seen> {
    stats.reads++;
    const output = await send<{ Item?: Record<string, AttributeValue>; ConsumedCapacity?: { CapacityUnits?: number } }>(
      new GetItemCommand({ TableName: table, Key: { [o.partitionKey]: { S: k } }, ConsistentRead: true, ReturnConsumedCapacity: "TOTAL" }),
      "GetItem",
    );
    return seenOf(output.Item);
  }

  /** The condition that the item is still as `seen` says, with its names and values. */
  function condition(seen: Seen): {
    ConditionExpression: string;
    ExpressionAttributeNames: Record<string, string>;
    ExpressionAttributeValues?: Record<string, AttributeValue>;
  } {
    if (seen.version === undefined) {
      return { ConditionExpression: "attribute_not_exists(#k)", ExpressionAttributeNames: { "#k": o.partitionKey } };
    }
    // An item without a version is another program's: replaced only while it stays so.
    if (seen.version === "") {
      return {
        ConditionExpression: "attribute_exists(#k) AND attribute_not_exists(#v)",
        ExpressionAttributeNames: { "#k": o.partitionKey, "#v": VERSION },
      };
    }
    return {
      ConditionExpression: "#v = :v",
      ExpressionAttributeNames: { "#v": VERSION },
      ExpressionAttributeValues: { ":v": { S: seen.version } },
    };
  }

  /**
   * Writes `state` (deletes the item when `undefined`) if the item is still `seen`. Answers the
   * new view; or, when another writer got there first, the item as the failed condition found it
   * (`undefined` when DynamoDB returned none: the item is gone, or the server does not return it).
   */
  async function write(k: string, seen: Seen, state: unknown, nowMs: number, expiresAtMs: number): Promise<Written> {
    const common = {
      TableName: table,
      ...condition(seen),
      ReturnValuesOnConditionCheckFailure: "ALL_OLD" as const,
      ReturnConsumedCapacity: "TOTAL" as const,
    };
    try {
      if (state === undefined) {
        if (seen.version !== undefined) await send(new DeleteItemCommand({ ...common, Key: { [o.partitionKey]: { S: k } } }), "DeleteItem");
        return { ok: true, seen: seenOf(undefined) };
      }
      const version = `${instance}${(++written).toString(36)}`;
      const expiresAt = Math.ceil(Math.max(expiresAtMs, nowMs) / 1000) + o.ttlMarginSeconds;
      await send(
        new PutItemCommand({
          ...common,
          Item: {
            [o.partitionKey]: { S: k },
            [VERSION]: { S: version },
            [STATE]: { S: JSON.stringify(state) },
            [o.ttlAttribute]: { N: String(expiresAt) },
          },
        }),
        "PutItem",
      );
      return { ok: true, seen: { version, state, verified: true } };
    } catch (error) {
      if ((error as Error)?.name !== "ConditionalCheckFailedException") throw error;
      stats.conflicts++;
      const item = (error as ConditionalCheckFailedException).Item;
      return { ok: false, current: item === undefined ? undefined : seenOf(item) };
    }
  }

  /**
   * Puts every item, each under the condition that it is still as seen, in one transaction. When
   * any condition fails nothing is written, and each item whose condition failed comes back as
   * the cancellation found it (`undefined`: none returned); `null` for the items that passed.
   */
  async function transact(puts: readonly TransactPut[]): Promise<Transacted> {
    const versions: string[] = [];
    const items = puts.map((p) => {
      const version = `${instance}${(++written).toString(36)}`;
      versions.push(version);
      const expiresAt = Math.ceil(Math.max(p.expiresAtMs, p.nowMs) / 1000) + o.ttlMarginSeconds;
      return {
        Put: {
          TableName: table,
          ...condition(p.seen),
          ReturnValuesOnConditionCheckFailure: "ALL_OLD" as const,
          Item: {
            [o.partitionKey]: { S: p.k },
            [VERSION]: { S: version },
            [STATE]: { S: JSON.stringify(p.state) },
            [o.ttlAttribute]: { N: String(expiresAt) },
          },
        },
      };
    });
    try {
      await send(new TransactWriteItemsCommand({ TransactItems: items, ReturnConsumedCapacity: "TOTAL" }), "TransactWriteItems");
      return { ok: true, seen: puts.map((p, i) => ({ version: versions[i], state: p.state, verified: true })) };
    } catch (error) {
      const reasons = (error as { CancellationReasons?: { Code?: string; Item?: Record<string, AttributeValue> }[] })?.CancellationReasons;
      if ((error as Error)?.name !== "TransactionCanceledException" || reasons?.length !== puts.length) throw error;
      if (!reasons.some((r) => r.Code === "ConditionalCheckFailed")) throw storeError(error, table, "TransactWriteItems");
      stats.conflicts++;
      return {
        ok: false,
        current: reasons.map((r) => r.Code !== "ConditionalCheckFailed" ? null : r.Item === undefined ? undefined : seenOf(r.Item)),
      };
    }
  }
  const many = { cache, keyOf, read, write, transact, noTransactions: false };
  // Compound decisions of this instance run one after another: they share items (a global one)
  // and would otherwise cancel each other's transactions; other instances' writes still do.
  let compound: Promise<unknown> = Promise.resolve();

  /** Decides `operations` (one item's, in arrival order) together, committed by one conditional write. */
  async function decideBatch(k: string, operations: readonly Operation[]): Promise<StoreResult[]> {
    let seen = cache.get(k) ?? ASSUMED_ABSENT;
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      let state = seen.state;
      let changed = false;
      let expiresAtMs = 0;
      let nowMs = 0;
      const results: StoreResult[] = [];
      for (const op of operations) {
        const evaluation = evaluateState(op.set, state, op.cost, op.nowMs, op.mode, op.marks, op.reservation, op.lease);
        results.push(evaluation.result);
        if (op.nowMs > nowMs) nowMs = op.nowMs;
        if (!evaluation.changed) continue;
        changed = true;
        state = evaluation.state;
        expiresAtMs = evaluation.expiresAtMs;
      }
      if (!changed) {
        // Decisions that write nothing (denials, peeks) stand only on the item as it is now.
        if (seen.verified) {
          cache.set(k, seen);
          return results;
        }
        seen = await read(k);
        continue;
      }
      const outcome = await write(k, seen, state, nowMs, expiresAtMs);
      if (outcome.ok) {
        cache.set(k, outcome.seen);
        return results;
      }
      // Another instance wrote first: decide again on the item it left, at once the first time;
      // after that, the key is contended: a random pause, growing, spreads the writers out.
      if (attempt > 0) await pause(Math.random() * Math.min(MAX_PAUSE_MS, 2 ** attempt));
      seen = outcome.current ?? await read(k);
    }
    throw new FloodgateError(
      "STORE_ERROR",
      `dynamoDBStore: ${operations[0]!.mode} of ${
        JSON.stringify(operations[0]!.key)
      } lost ${MAX_ATTEMPTS} races in a row to other writers of the same key.`,
    );
  }
  const enqueue = batcher(decideBatch);
  const run = (
    set: PolicySet,
    key: string,
    cost: number,
    nowMs: number,
    mode: EvaluateMode,
    marks?: readonly number[],
    reservation?: ReservationArgs,
    signal?: CallSignal,
    lease?: LeaseRequest,
  ): Promise<StoreResult> => enqueue(keyOf(set, key), { set, key, cost, nowMs, mode, marks, reservation, signal, lease });

  return {
    name: "dynamodb",
    ownsClock: false,
    stats,
    consume: (set, key, cost, nowMs, signal) => run(set, key, cost, nowMs, "consume", undefined, undefined, signal),
    peek: (set, key, nowMs, signal) => run(set, key, 1, nowMs, "peek", undefined, undefined, signal),
    // A compound decision: one TransactWriteItems over every pair's item (many.ts).
    consumeMany: (calls, cost, nowMs) => {
      const step = compound.then(() => consumeMany(many, calls, cost, nowMs));
      compound = step.catch(() => undefined);
      return step;
    },
    refund: async (set, key, cost, nowMs, marks) => {
      await run(set, key, cost, nowMs, "refund", marks);
    },
    reset: async (set, key) => {
      const k = keyOf(set, key);
      cache.delete(k);
      await send(
        new DeleteItemCommand({ TableName: table, Key: { [o.partitionKey]: { S: k } }, ReturnConsumedCapacity: "TOTAL" }),
        "DeleteItem",
      );
    },
    penalty: async (set, key, cost, nowMs) => {
      await run(set, key, cost, nowMs, "penalty");
    },
    // A block's duration in ms rides where the other modes take a cost.
    block: async (set, key, durationMs, nowMs) => {
      await run(set, key, durationMs, nowMs, "block");
    },
    unblock: async (set, key) => {
      await run(set, key, 0, 0, "unblock");
    },
    reserve: (set, key, cost, nowMs, id, ttlMs, signal) => run(set, key, cost, nowMs, "reserve", undefined, { id, ttlMs }, signal),
    // Leased mode: returns, the request and a new lease in one conditional write of the key's item.
    lease: (set, key, request, nowMs, signal) => run(set, key, 0, nowMs, "lease", undefined, undefined, signal, request),
    settle: async (set, key, id, actual, nowMs) => (await run(set, key, 0, nowMs, "settle", undefined, { id, actual }))[0] === 1,
  };
}
