import {
  type CallSignal,
  FIELDS_PER_POLICY,
  FloodgateError,
  type LeaseRequest,
  type ManyCall,
  overrideBlocked,
  type PolicyKind,
  type PolicySet,
  type RateLimitStore,
  type StoreResult,
} from "@floodgate/core/store";
import { answerOf, errnoOf, RETRYABLE, type Runner, runnerOf, setupError, storeError } from "./client.ts";
import { baseKey, checkId, policyKeys } from "./keys.ts";
import { migrationStatements, namesOf } from "./migration.ts";
import { type MysqlStoreOptions, parseStoreOptions } from "./options.ts";
import { KINDS, prepare, type Prepared } from "./prepared.ts";
import { oneProcedure } from "./sql/consume-one.ts";

/** What `mysqlStore()` returns: a {@link RateLimitStore} with its schema's lifecycle. */
export interface MysqlStore extends RateLimitStore {
  /** See {@link RateLimitStore.reserve}: the estimate charged and a ledger row written in one transaction. */
  reserve: NonNullable<RateLimitStore["reserve"]>;
  /** See {@link RateLimitStore.settle}. */
  settle: NonNullable<RateLimitStore["settle"]>;
  /** See {@link RateLimitStore.lease}: returns, the request and a new lease in one transaction. */
  lease: NonNullable<RateLimitStore["lease"]>;
  /** See {@link RateLimitStore.penalty}. */
  penalty: NonNullable<RateLimitStore["penalty"]>;
  /** See {@link RateLimitStore.block}. */
  block: NonNullable<RateLimitStore["block"]>;
  /** See {@link RateLimitStore.unblock}. */
  unblock: NonNullable<RateLimitStore["unblock"]>;
  /** Every pair of a compound decision in one CALL: one round trip, one transaction (see {@link RateLimitStore.consumeMany}). */
  consumeMany(calls: readonly ManyCall[], cost: number, nowMs: number, signal?: CallSignal): Promise<StoreResult[]>;
  readonly ownsClock: boolean;
  /**
   * Creates the table when missing and (re)creates the procedures: idempotent, explicit (the
   * store never runs DDL by itself). Needs CREATE, CREATE ROUTINE and ALTER ROUTINE.
   */
  migrate(): Promise<void>;
  /**
   * Deletes up to `rows` rows (default 1,000) whose expiry has passed on the server's clock and
   * answers how many it deleted. Writes already sweep a few now and then (`sweepEvery`); call
   * this from a job to keep a table with bursts of one-off identifiers at the size of the active ones.
   */
  sweep(rows?: number): Promise<number>;
  /** Nothing to release: the client belongs to the caller, who ends it. */
  dispose(): void;
}

const encoder = new TextEncoder();

/** How long a setup error (no migration, no privilege, read-only server) is answered without asking the server again. */
const SETUP_HOLD_MS = 5000;
/** Attempts of an operation rolled back by a deadlock or a lock wait timeout (nothing was charged). */
const ATTEMPTS = 5;

class MysqlRateLimitStore implements MysqlStore {
  readonly name = "mysql";
  /** The kinds its procedures decide (a calendar window's periods need a time-zone calendar they do not have). */
  readonly kinds: readonly PolicyKind[] = KINDS;
  readonly ownsClock: boolean;
  readonly #run: Runner;
  readonly #names: ReturnType<typeof namesOf>;
  readonly #options: MysqlStoreOptions;
  readonly #where: string;
  readonly #prepared = new WeakMap<PolicySet, Prepared>();
  readonly #sweepEvery: number;
  readonly #sweepRows: number;
  #writes = 0;
  #setup: { error: FloodgateError; until: number } | undefined;

  constructor(options: MysqlStoreOptions) {
    const o = parseStoreOptions(options);
    this.#options = o;
    this.#run = runnerOf(o.client);
    this.#names = namesOf(o);
    this.ownsClock = (o.clock ?? "server") === "server";
    this.#sweepEvery = o.sweepEvery ?? 16;
    this.#sweepRows = o.sweepRows ?? 64;
    this.#where = o.database === undefined ? "the connection's database" : `database \`${o.database}\``;
  }

  #set(set: PolicySet): Prepared {
    let prepared = this.#prepared.get(set);
    if (prepared === undefined) this.#prepared.set(set, prepared = prepare(set));
    return prepared;
  }

  /** The time argument: NULL for the server's clock, else the limiter's in integer µs. */
  #now(nowMs: number): number | null {
    return this.ownsClock ? null : Math.floor(nowMs * 1000);
  }

  /** Rows to sweep with this write: `sweepRows` every `sweepEvery` writes. */
  #sweep(): number {
    return this.#sweepEvery > 0 && ++this.#writes % this.#sweepEvery === 0 ? this.#sweepRows : 0;
  }

  /** One CALL (or statement), retried when a deadlock rolled it back; setup errors held and named. */
  async #call(op: string, procedure: string | undefined, sql: string, values: readonly unknown[], signal?: CallSignal): Promise<unknown> {
    const held = this.#setup;
    if (held !== undefined) {
      if (Date.now() < held.until) throw held.error;
      this.#setup = undefined;
    }
    const statement = procedure === undefined ? sql : `CALL ${this.#names.procedure(procedure)}(${values.map(() => "?").join(", ")})`;
    for (let attempt = 1;; attempt++) {
      try {
        return await this.#run(statement, values);
      } catch (error) {
        const errno = errnoOf(error);
        if (errno !== undefined && RETRYABLE.includes(errno) && attempt < ATTEMPTS && signal?.aborted !== true) {
          // A moment apart, so the transactions that collided do not collide again at once.
          await new Promise((resolve) => setTimeout(resolve, Math.random() * 4 * attempt));
          continue;
        }
        const setup = setupError(error, this.#where, this.#options.table ?? "floodgate");
        if (setup !== undefined) {
          this.#setup = { error: setup, until: Date.now() + SETUP_HOLD_MS };
          throw setup;
        }
        throw storeError(op, error);
      }
    }
  }

  /** A consume-procedure call: op 0 peek, 1 consume, 2 reserve. */
  async #decide(
    op: 0 | 1 | 2,
    set: PolicySet,
    key: string,
    cost: number,
    nowMs: number,
    id: string | null,
    ttlMs: number,
    signal?: CallSignal,
  ): Promise<StoreResult> {
    const prepared = this.#set(set);
    const base = baseKey(set.prefix, key);
    const name = op === 0 ? "peek" : op === 1 ? "consume" : "reserve";
    const one = op === 1 ? prepared.one : undefined;
    const rows = one !== undefined
      // One policy consumed: its kind's own procedure (sql/consume-one.ts), same answer.
      ? await this.#call(name, oneProcedure(one[0]), "", [base, one[1], one[2], one[3], cost, this.#now(nowMs), this.#sweep()], signal)
      : await this.#call(name, "consume", "", [
        base,
        prepared.kinds,
        prepared.nums,
        cost,
        this.#now(nowMs),
        op,
        id,
        ttlMs,
        op === 0 ? 0 : this.#sweep(),
      ], signal);
    const numbers = parse(answerOf(rows));
    const count = prepared.count;
    const length = 3 + count * FIELDS_PER_POLICY + (numbers?.[2] === 1 && op > 0 ? count : 0);
    if (numbers === undefined || numbers.length !== length) throw unexpected(name, rows, length);
    const result = numbers.slice(2);
    if (numbers[0]! > 0) overrideBlocked(result, count, numbers[0]!, numbers[1]!);
    return result;
  }

  consume(set: PolicySet, key: string, cost: number, nowMs: number, signal?: CallSignal): Promise<StoreResult> {
    return this.#decide(1, set, key, cost, nowMs, null, 0, signal);
  }

  peek(set: PolicySet, key: string, nowMs: number, signal?: CallSignal): Promise<StoreResult> {
    return this.#decide(0, set, key, 1, nowMs, null, 0, signal);
  }

  reserve(set: PolicySet, key: string, cost: number, nowMs: number, id: string, ttlMs: number, signal?: CallSignal): Promise<StoreResult> {
    return this.#decide(2, set, key, cost, nowMs, checkId(id, "a reservation's"), Math.ceil(ttlMs), signal);
  }

  async consumeMany(calls: readonly ManyCall[], cost: number, nowMs: number, signal?: CallSignal): Promise<StoreResult[]> {
    // Sorted by base key: every compound call locks its rows in one order (sql/many.ts).
    const pairs = calls.map((call, i) => ({ i, base: baseKey(call.set.prefix, call.key), prepared: this.#set(call.set) }))
      .sort((a, b) => (a.base < b.base ? -1 : a.base > b.base ? 1 : 0));
    const rows = await this.#call("consumeMany", "consume_many", "", [
      pairs.map((p) => p.base).join(""),
      pairs.map((p) => encoder.encode(p.base).length).join(","),
      pairs.map((p) => p.prepared.kinds).join(","),
      pairs.map((p) => p.prepared.nums).join(";"),
      cost,
      this.#now(nowMs),
    ], signal);
    const answers = answerOf(rows)?.split(";");
    const results: StoreResult[] = new Array(calls.length);
    if (answers?.length !== pairs.length + 1) throw unexpected("consumeMany", rows, pairs.length);
    const charged = answers[0] === "1";
    pairs.forEach((pair, at) => {
      const numbers = parse(answers[at + 1]);
      const count = pair.prepared.count;
      const length = 3 + count * FIELDS_PER_POLICY + (charged ? count : 0);
      if (numbers === undefined || numbers.length !== length) throw unexpected("consumeMany", rows, length);
      const result = numbers.slice(2);
      if (numbers[0]! > 0) overrideBlocked(result, count, numbers[0]!, numbers[1]!);
      results[pair.i] = result;
    });
    return results;
  }

  async refund(set: PolicySet, key: string, cost: number, nowMs: number, marks?: readonly number[]): Promise<void> {
    const prepared = this.#set(set);
    const list = marks === undefined ? null : marks.map((m) => String(Math.trunc(m))).join(",");
    await this.#call("refund", "refund", "", [baseKey(set.prefix, key), prepared.kinds, prepared.nums, cost, this.#now(nowMs), list]);
  }

  async settle(set: PolicySet, key: string, id: string, actual: number, nowMs: number): Promise<boolean> {
    const prepared = this.#set(set);
    const rows = await this.#call("settle", "settle", "", [
      baseKey(set.prefix, key),
      prepared.kinds,
      prepared.nums,
      checkId(id, "a reservation's"),
      actual,
      this.#now(nowMs),
    ]);
    const answer = answerOf(rows);
    if (answer !== "0" && answer !== "1") throw unexpected("settle", rows, 1);
    return answer === "1";
  }

  async lease(set: PolicySet, key: string, request: LeaseRequest, nowMs: number, signal?: CallSignal): Promise<StoreResult> {
    const prepared = this.#set(set);
    const returns = (request.returns ?? []).map((r) =>
      `${checkId(r.id, "a lease's")}:${Number.isFinite(r.unspent) ? Math.max(0, Math.floor(r.unspent)) : Number.MAX_SAFE_INTEGER}`
    );
    const rows = await this.#call("lease", "lease", "", [
      baseKey(set.prefix, key),
      prepared.kinds,
      prepared.leasedNums(request.lifeMs),
      request.cost,
      request.want,
      Math.floor(request.lifeMs * 1000),
      Math.ceil(request.minLifeMs * 1000),
      this.#now(nowMs),
      checkId(request.id, "a lease's"),
      returns.join(","),
      this.#sweep(),
    ], signal);
    const numbers = parse(answerOf(rows));
    const length = 1 + prepared.count * (FIELDS_PER_POLICY + 1) + 3;
    if (numbers === undefined || numbers.length !== length) throw unexpected("lease", rows, length);
    return numbers;
  }

  async reset(set: PolicySet, key: string): Promise<void> {
    const base = baseKey(set.prefix, key);
    const keys = [...policyKeys(base, set.policies.length), `${base}:b`];
    await this.#call("reset", undefined, `DELETE FROM ${this.#table()} WHERE k IN (${keys.map(() => "?").join(", ")})`, keys);
  }

  async penalty(set: PolicySet, key: string, cost: number, nowMs: number): Promise<void> {
    const prepared = this.#set(set);
    await this.#call("penalty", "penalty", "", [baseKey(set.prefix, key), prepared.kinds, prepared.nums, cost, this.#now(nowMs)]);
  }

  async block(set: PolicySet, key: string, durationMs: number, nowMs: number): Promise<void> {
    await this.#call("block", "block", "", [baseKey(set.prefix, key), Math.ceil(durationMs), this.#now(nowMs)]);
  }

  async unblock(set: PolicySet, key: string): Promise<void> {
    await this.#call("unblock", undefined, `DELETE FROM ${this.#table()} WHERE k = ?`, [`${baseKey(set.prefix, key)}:b`]);
  }

  async migrate(): Promise<void> {
    this.#setup = undefined;
    for (const statement of migrationStatements(this.#options)) {
      try {
        await this.#run(statement, []);
      } catch (error) {
        throw setupError(error, this.#where, this.#options.table ?? "floodgate") ?? storeError("migrate", error);
      }
    }
  }

  async sweep(rows = 1000): Promise<number> {
    const result = await this.#call(
      "sweep",
      undefined,
      `DELETE FROM ${this.#table()} WHERE expires_us < TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) LIMIT ?`,
      [Math.max(1, Math.floor(rows))],
    );
    return (result as { affectedRows?: number }).affectedRows ?? 0;
  }

  dispose(): void {}

  #table(): string {
    return `${this.#options.database === undefined ? "" : `\`${this.#options.database}\`.`}${this.#names.table}`;
  }
}

/** The comma-separated integers of a procedure's answer. */
function parse(answer: string | undefined): number[] | undefined {
  if (answer === undefined) return undefined;
  const numbers = answer.split(",").map(Number);
  return numbers.every(Number.isSafeInteger) ? numbers : undefined;
}

function unexpected(op: string, rows: unknown, length: number): FloodgateError {
  const answer = answerOf(rows);
  return new FloodgateError(
    "STORE_ERROR",
    `mysql store: ${op} got an unexpected answer (${
      answer === undefined ? "no row" : JSON.stringify(answer.slice(0, 200))
    }); expected ${length} integers. Is the migration of this version of @floodgate/mysql run?`,
  );
}

/**
 * A rate-limit store on MySQL 8 or MariaDB 10.6+ through mysql2: every decision one CALL of a
 * stored procedure that checks and charges every policy of the set in one transaction, on the
 * server's clock, with the rows locked (no lost update across processes). Run `migrate()` once
 * (or the SQL of `migrationSql()`) before the first decision.
 *
 * @example
 * import mysql from "mysql2/promise";
 * const store = mysqlStore({ client: mysql.createPool(process.env.DATABASE_URL!) });
 * await store.migrate();
 * const limiter = createRateLimiter({ policy: slidingWindow({ limit: 100, window: "1m" }), store });
 */
export function mysqlStore(options: MysqlStoreOptions): MysqlStore {
  return new MysqlRateLimitStore(options);
}
