import {
  type CallSignal,
  FIELDS_PER_POLICY,
  FloodgateError,
  leasedLimits,
  type LeaseRequest,
  type ManyCall,
  type PolicySet,
  type RateLimitStore,
  type StoreResult,
} from "@floodgate/core/store";
import { clientKind, floats, type PgClientLike, type PostgresJsLike, type Runner, runnerOf, storeError, texts } from "./clients.ts";
import { keyOf } from "./keys.ts";
import { migrationBody, migrationSql, named, SCHEMA_VERSION, type SqlNames, sqlNames } from "./sql/migration.ts";
import type { CounterKind } from "./sql/counter.ts";
import { directCharge } from "./sql/direct.ts";
import { denialFrom } from "./denial.ts";
import { type Prepared, prepareSet, STORED_KINDS } from "./prepared.ts";
import { checkOptions, type PostgresStoreOptions } from "./options.ts";

/** A PostgreSQL store: a {@link RateLimitStore} with the database's lifecycle besides. */
export interface PostgresStore extends RateLimitStore {
  readonly ownsClock: boolean;
  /** Which client the store was given: node-postgres (`"pg"`) or postgres.js (`"postgres"`). */
  readonly client: "pg" | "postgres";
  /** The schema and table names the store uses. */
  readonly names: SqlNames;
  /** Every pair of a compound decision in one call of one function: one round trip, one transaction. */
  consumeMany(calls: readonly ManyCall[], cost: number, nowMs: number, signal?: CallSignal): Promise<StoreResult[]>;
  /**
   * Creates or upgrades the schema, tables and functions (idempotent, in one transaction; see
   * {@link migrationSql}). Run it once at deploy time, from a role allowed to create them; the
   * store never runs DDL on its own.
   */
  migrate(): Promise<void>;
  /** The migration's SQL for this store's schema, table and `unlogged` option, to review or apply yourself. */
  migrationSql(): string;
  /**
   * Deletes up to `limit` rows (default 10,000) of each table whose state no longer matters,
   * skipping rows in use; answers how many state rows went. Writes already sweep a few now and
   * then (`sweepEvery`); call this from a scheduled job to bound the tables tighter.
   */
  sweep(limit?: number): Promise<number>;
  /**
   * Checks that the migration has run (at this package's schema version) and that the store can
   * write: resolves, or rejects with one FloodgateError naming the fix. Call it at startup.
   */
  check(): Promise<void>;
}

/** The store's functions, one statement each. */
type Fn =
  | "consume"
  | `charge_${CounterKind}`
  | `direct_${CounterKind}`
  | "consumeMany"
  | "refund"
  | "settle"
  | "admin"
  | "lease"
  | "sweep"
  | "version";

/** The arguments of the charge functions (sql/counter.ts). */
const CHARGE_ARGS = "$1::text, $2::float8, $3::float8, $4::float8, $5::float8, $6::float8[]";

/** The database's clock as µs, or the limiter's (`clock: "local"`). */
const micros = (nowMs: number): number => Math.floor(nowMs * 1000);

class PgStore implements PostgresStore {
  readonly name = "postgres";
  readonly kinds = STORED_KINDS;
  readonly ownsClock: boolean;
  readonly client: "pg" | "postgres";
  readonly names: SqlNames;
  readonly #run: Runner;
  readonly #unlogged: boolean;
  readonly #sweepEvery: number;
  readonly #sweepBatch: number;
  readonly #client: PgClientLike | PostgresJsLike;
  readonly #sql: Readonly<Record<Fn, string>>;
  readonly #prepared = new WeakMap<PolicySet, Prepared>();
  #writes = 0;

  constructor(options: PostgresStoreOptions) {
    const o = checkOptions(options);
    this.client = clientKind(o.client)!;
    this.names = sqlNames("postgresStore()", o);
    this.ownsClock = (o.clock ?? "server") === "server";
    this.#client = o.client;
    this.#run = runnerOf(o.client, this.client, o.prepare ?? true);
    this.#unlogged = o.unlogged ?? false;
    this.#sweepEvery = o.sweepEvery ?? 1000;
    this.#sweepBatch = o.sweepBatch ?? 100;
    const f = (fn: string, args: string): string => named(`SELECT @S.@T_${fn}(${args})`, this.names);
    this.#sql = {
      consume: f(
        "consume",
        "$1::text, $2::text, $3::float8[], $4::float8[], $5::float8[], $6::float8, $7::float8, $8::text, $9::float8, $10::int",
      ),
      consumeMany: f("consume_many", "$1::text[], $2::text[], $3::float8[], $4::float8[], $5::float8[], $6::float8, $7::float8"),
      refund: f("refund", "$1::text, $2::text, $3::float8[], $4::float8[], $5::float8, $6::float8, $7::float8[]"),
      settle: f("settle", "$1::text, $2::text, $3::float8[], $4::float8[], $5::text, $6::float8, $7::float8"),
      admin: f("admin", "$1::text, $2::text, $3::float8[], $4::float8[], $5::text, $6::float8, $7::float8"),
      lease: f(
        "lease",
        "$1::text, $2::text, $3::float8[], $4::float8[], $5::float8, $6::float8, $7::float8, $8::float8, $9::text, $10::text[], $11::float8[], $12::float8",
      ),
      charge_t: f("charge_t", CHARGE_ARGS),
      charge_f: f("charge_f", CHARGE_ARGS),
      charge_s: f("charge_s", CHARGE_ARGS),
      direct_t: named(directCharge("t"), this.names),
      direct_f: named(directCharge("f"), this.names),
      direct_s: named(directCharge("s"), this.names),
      sweep: f("sweep", "$1::int, $2::float8"),
      version: f("version", ""),
    };
  }

  consume(set: PolicySet, key: string, cost: number, nowMs: number): Promise<StoreResult> {
    return this.#decide("consume", set, key, cost, nowMs, null, 0);
  }

  peek(set: PolicySet, key: string, nowMs: number): Promise<StoreResult> {
    return this.#decide("peek", set, key, 0, nowMs, null, 0);
  }

  reserve(set: PolicySet, key: string, cost: number, nowMs: number, id: string, ttlMs: number): Promise<StoreResult> {
    return this.#decide("reserve", set, key, cost, nowMs, id, ttlMs);
  }

  /**
   * Every pair in one call of `<table>_consume_many`: one round trip, one transaction, the rows
   * locked in key order (see sql/many.ts).
   */
  async consumeMany(calls: readonly ManyCall[], cost: number, nowMs: number): Promise<StoreResult[]> {
    const keys: string[] = [];
    const kinds: string[] = [];
    const lims: string[] = [];
    const pars: string[] = [];
    const blocks: string[] = [];
    let blocking = false;
    let total = 0;
    const prepared = calls.map((call) => {
      const p = this.#prepare(call.set);
      keys.push(keyOf(call.set.prefix, call.key));
      kinds.push(p.kinds);
      lims.push(p.lims.slice(1, -1));
      pars.push(p.pars.slice(1, -1));
      for (const policy of p.policies) blocks.push(String(policy.blockMs));
      blocking ||= p.blocks !== null;
      total += p.count;
      return p;
    });
    const reply = await this.#call("consumeMany", [
      texts(keys),
      texts(kinds),
      `{${lims.join(",")}}`,
      `{${pars.join(",")}}`,
      blocking ? `{${blocks.join(",")}}` : null,
      cost,
      this.#now(nowMs),
    ]);
    const charged = Array.isArray(reply) && reply[0] === 1;
    const flat = this.#result("consumeMany", reply, 1 + calls.length + total * FIELDS_PER_POLICY + (charged ? total : 0));
    const results: StoreResult[] = [];
    let at = 1;
    for (const p of prepared) {
      const length = 1 + p.count * FIELDS_PER_POLICY + (charged ? p.count : 0);
      results.push(flat.slice(at, at + length));
      at += length;
    }
    return results;
  }

  async refund(set: PolicySet, key: string, cost: number, nowMs: number, marks?: readonly number[]): Promise<void> {
    const p = this.#prepare(set);
    await this.#call("refund", [keyOf(set.prefix, key), p.kinds, p.lims, p.pars, cost, this.#now(nowMs), marks ? floats(marks) : null]);
  }

  async settle(set: PolicySet, key: string, id: string, actual: number, nowMs: number): Promise<boolean> {
    const p = this.#prepare(set);
    const reply = await this.#call("settle", [keyOf(set.prefix, key), p.kinds, p.lims, p.pars, id, actual, this.#now(nowMs)]);
    if (typeof reply !== "boolean") throw this.#unexpected("settle", reply, "true or false");
    return reply;
  }

  async lease(set: PolicySet, key: string, request: LeaseRequest, nowMs: number, _signal?: CallSignal): Promise<StoreResult> {
    const p = this.#prepare(set);
    const returns = request.returns ?? [];
    const reply = await this.#call("lease", [
      keyOf(set.prefix, key),
      p.kinds,
      floats(leasedLimits(p.policies, request.lifeMs)),
      p.pars,
      request.cost,
      request.want,
      Math.floor(request.lifeMs * 1000),
      Math.ceil(request.minLifeMs * 1000),
      request.id,
      texts(returns.map((r) => r.id)),
      floats(returns.map((r) => r.unspent)),
      this.#now(nowMs),
    ]);
    return this.#result("lease", reply, 1 + p.count * (FIELDS_PER_POLICY + 1) + 3);
  }

  async reset(set: PolicySet, key: string): Promise<void> {
    await this.#admin(set, key, "r", 0, 0);
  }

  async penalty(set: PolicySet, key: string, cost: number, nowMs: number): Promise<void> {
    await this.#admin(set, key, "p", cost, nowMs);
  }

  async block(set: PolicySet, key: string, durationMs: number, nowMs: number): Promise<void> {
    await this.#admin(set, key, "b", durationMs, nowMs);
  }

  async unblock(set: PolicySet, key: string): Promise<void> {
    await this.#admin(set, key, "u", 0, 0);
  }

  async migrate(): Promise<void> {
    // One simple-protocol call with several statements: the migration's own BEGIN/COMMIT hold.
    try {
      if (this.client === "pg") await (this.#client as PgClientLike & { query(text: string): Promise<unknown> }).query(this.migrationSql());
      else {
        // postgres.js refuses BEGIN in a pooled query: its begin() holds one connection for the transaction.
        const body = migrationBody("postgresStore()", { ...this.names, unlogged: this.#unlogged });
        await (this.#client as PostgresJsLike & { begin(f: (tx: PostgresJsLike) => unknown): Promise<unknown> }).begin((tx) =>
          tx.unsafe(body)
        );
      }
    } catch (error) {
      throw storeError("postgresStore()", "migrate", error, this.names.schema, this.names.table);
    }
  }

  migrationSql(): string {
    return migrationSql({ ...this.names, unlogged: this.#unlogged });
  }

  async sweep(limit = 10_000): Promise<number> {
    if (!Number.isInteger(limit) || limit < 1) {
      throw new FloodgateError("INVALID_ARGUMENT", `postgres store: sweep(limit) takes a whole number >= 1; got ${String(limit)}.`);
    }
    const reply = await this.#call("sweep", [limit, this.ownsClock ? null : micros(Date.now())]);
    return Number(reply);
  }

  async check(): Promise<void> {
    const version = await this.#call("version", []);
    if (version !== SCHEMA_VERSION) {
      throw new FloodgateError(
        "STORE_ERROR",
        `postgres store: schema "${this.names.schema}" has version ${
          String(version)
        } of the store's functions; this package needs version ${SCHEMA_VERSION}. Run \`await store.migrate()\` (idempotent) to upgrade it.`,
      );
    }
    // A write that changes nothing: fails on a read-only server or without the privileges.
    await this.#call("admin", [keyOf("\u0001check:", ""), "f", "{1}", "{1000}", "u", 0, null]);
  }

  async #decide(
    op: "consume" | "peek" | "reserve",
    set: PolicySet,
    key: string,
    cost: number,
    nowMs: number,
    id: string | null,
    ttlMs: number,
  ): Promise<StoreResult> {
    const p = this.#prepare(set);
    let sweep = 0;
    if (op !== "peek" && this.#sweepEvery > 0 && ++this.#writes >= this.#sweepEvery) {
      this.#writes = 0;
      sweep = this.#sweepBatch;
    }
    const k = keyOf(set.prefix, key);
    // One counter policy's charge: its kind's upsert (a key of up to 1,024 bytes: consume hashes longer ones).
    const c = op === "consume" && cost > 0 && sweep === 0 && k.length * 3 <= 1024 ? p.counter : null;
    // Its own statement, one round trip (sql/direct.ts), unless the set blocks: a denial starts the block in the function.
    if (c !== null && p.blocks === null) {
      const direct = await this.#call(`direct_${c.kind}`, [k, c.limit, c.parameter, cost, this.#now(nowMs)]);
      if (Array.isArray(direct)) {
        if (direct[0] !== -1) return this.#result(op, direct, 2 + FIELDS_PER_POLICY);
        const denied = denialFrom(set, c.kind, direct, cost);
        if (denied !== undefined) return denied;
      }
    }
    // A set that blocks, or no row from the statement (sql/direct.ts says when): the kind's charge function decides.
    const reply = c !== null
      ? await this.#call(`charge_${c.kind}`, [k, c.limit, c.parameter, cost, this.#now(nowMs), p.blocks])
      : await this.#call("consume", [
        k,
        p.kinds,
        p.lims,
        p.pars,
        op === "peek" ? null : p.blocks,
        op === "peek" ? 0 : cost,
        this.#now(nowMs),
        id,
        ttlMs,
        sweep,
      ]);
    const charged = op !== "peek" && Array.isArray(reply) && reply[0] === 1;
    return this.#result(op, reply, 1 + p.count * FIELDS_PER_POLICY + (charged ? p.count : 0));
  }

  async #admin(set: PolicySet, key: string, op: "r" | "p" | "b" | "u", amount: number, nowMs: number): Promise<void> {
    const p = this.#prepare(set);
    await this.#call("admin", [
      keyOf(set.prefix, key),
      p.kinds,
      p.lims,
      p.pars,
      op,
      amount,
      op === "p" || op === "b" ? this.#now(nowMs) : null,
    ]);
  }

  #now(nowMs: number): number | null {
    return this.ownsClock ? null : micros(nowMs);
  }

  async #call(fn: Fn, values: unknown[]): Promise<unknown> {
    try {
      return await this.#run(`fg_${this.names.schema}_${this.names.table}_${fn}`, this.#sql[fn], values);
    } catch (error) {
      throw storeError("postgres store", fn, error, this.names.schema, this.names.table);
    }
  }

  #result(op: string, reply: unknown, length: number): StoreResult {
    if (!Array.isArray(reply) || reply.length !== length || !reply.every((v) => typeof v === "number")) {
      throw this.#unexpected(op, reply, `an array of ${length} numbers`);
    }
    return reply as number[];
  }

  #unexpected(op: string, reply: unknown, expected: string): FloodgateError {
    const shown = JSON.stringify(reply)?.slice(0, 200) ?? String(reply);
    return new FloodgateError("STORE_ERROR", `postgres store: ${op} got an unexpected reply (${shown}); expected ${expected}.`);
  }

  #prepare(set: PolicySet): Prepared {
    let prepared = this.#prepared.get(set);
    if (prepared === undefined) this.#prepared.set(set, prepared = prepareSet(set));
    return prepared;
  }
}

/**
 * A rate-limit store in PostgreSQL, through node-postgres (`pg`: a Pool, a Client) or postgres.js
 * (`postgres`), whichever you pass: every decision is one statement (one token bucket, fixed
 * window or sliding window) or one call of a PL/pgSQL function, one round trip, atomic for the
 * whole policy set on the database's clock. Run {@link PostgresStore.migrate}
 * (or apply {@link migrationSql}) once before use. See docs/sql.md.
 *
 * @example
 * import pg from "pg";
 * const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL });
 * const store = postgresStore({ client: pool });
 * await store.migrate(); // once, at deploy time
 * const limiter = createRateLimiter({ policy: slidingWindow({ limit: 100, window: "1m" }), store });
 */
export function postgresStore(options: PostgresStoreOptions): PostgresStore {
  return new PgStore(options);
}
