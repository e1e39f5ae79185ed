/**
 * A 4-dimension compound decision on the database stores (a harness, not a test):
 *   node --import tsx bench/compound-stores.ts [--store postgres|mysql|dynamodb|deno-kv|all] [--decisions 2000] [--rounds 3]
 *
 * The dimensions of bench/compound.ts (a user's sliding window, an organisation's fixed window
 * per day, an IP's token bucket, a global fixed window per second; limits raised so that every
 * decision admits; 1,000 users, 100 organisations, 1,000 IPs in a cycle), on each store, three
 * subjects in one run, interleaved round by round (median of `--rounds`):
 *  - "compound": `compound.limit()` over the store's compound step (`consumeMany`);
 *  - "ordered": `compound.limit()` over the same store without its compound step: the limiter's
 *    ordered path (each dimension charged in turn, given back on a refusal);
 *  - "4 × limit()": the four calls one after another, each awaited.
 * Round trips per decision are counted at the client: the statements sent (PostgreSQL, MySQL),
 * the requests sent (DynamoDB, on dynalite with transactions added at the server:
 * test/dynamodb/fixtures/dynalite-server.cjs), the reads and commits (Deno KV, @deno/kv's local
 * SQLite backend). The SQL stores run in a database created for the run and dropped after it.
 * Decisions/s at 1 and 16 loops in flight, over a pool of 16 connections where there is one.
 */
import pg from "pg";
import os from "node:os";
import {
  createCompoundLimiter,
  createRateLimiter,
  fixedWindow,
  type RateLimitStore,
  slidingWindow,
  tokenBucket,
} from "../packages/core/src/index.ts";
import { postgresStore } from "../packages/postgres/src/index.ts";
import { mysqlStore } from "../packages/mysql/src/index.ts";
import { testDatabase } from "../test/support/postgres-server.ts";
import { mysqlDatabase } from "../test/support/mysql-server.ts";
import { createTable, dynamoDBStore } from "../packages/dynamodb/src/index.ts";
import { denoKvStore, type KvDatabase } from "../packages/deno-kv/src/index.ts";
import { startDynalite } from "../test/dynamodb/dynalite.ts";
import { databasePath } from "../test/deno-kv/support.ts";

const arg = (name: string, fallback: string): string => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1]! : fallback;
};
const DECISIONS = Number(arg("decisions", "2000"));
const ROUNDS = Number(arg("rounds", "3"));
const WHICH = arg("store", "all");
const POOL = 16;
const NAMES = ["compound", "ordered", "4 × limit()"] as const;
type Subject = (typeof NAMES)[number];

/** The same store without its compound step: a compound limiter over it takes the ordered path. */
function withoutCompoundStep(store: RateLimitStore): RateLimitStore {
  return new Proxy(store, {
    get(target, name) {
      if (name === "consumeMany") return undefined;
      const value = Reflect.get(target, name, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

/** The three subjects over `store`: each takes the request's index and decides it. */
function subjects(store: RateLimitStore, run: string): Record<Subject, (i: number) => Promise<unknown>> {
  const big = 10_000_000;
  const dims = (s: RateLimitStore, tag: string) => ({
    user: createRateLimiter({ policy: slidingWindow({ limit: big, window: "1m" }), store: s, prefix: `${run}${tag}u:` }),
    org: createRateLimiter({ policy: fixedWindow({ limit: big, window: "1d" }), store: s, prefix: `${run}${tag}o:` }),
    ip: createRateLimiter({ policy: tokenBucket({ capacity: big, refillRate: 1_000_000 }), store: s, prefix: `${run}${tag}i:` }),
    global: createRateLimiter({ policy: fixedWindow({ limit: big, window: "1s" }), store: s, prefix: `${run}${tag}g:` }),
  });
  const native = createCompoundLimiter({ dimensions: dims(store, "n") });
  const ordered = createCompoundLimiter({ dimensions: dims(withoutCompoundStep(store), "o") });
  if (native.path !== "store" || ordered.path !== "ordered") throw new Error(`paths: ${native.path}, ${ordered.path}`);
  const separate = dims(store, "s");
  const keys = Array.from(
    { length: 1000 },
    (_, i) => ({ user: `user:${i}`, org: `org:${i % 100}`, ip: `10.0.${i >> 8}.${i & 255}`, global: "all" }),
  );
  return {
    compound: (i) => native.limit(keys[i % 1000]!),
    ordered: (i) => ordered.limit(keys[i % 1000]!),
    "4 × limit()": async (i) => {
      const k = keys[i % 1000]!;
      await separate.user.limit(k.user);
      await separate.org.limit(k.org);
      await separate.ip.limit(k.ip);
      await separate.global.limit(k.global);
    },
  };
}

async function loop(decide: (i: number) => Promise<unknown>, n: number, concurrency: number): Promise<number> {
  let next = 0;
  const start = performance.now();
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (next < n) await decide(next++);
  }));
  return (n / (performance.now() - start)) * 1000;
}

const median = (xs: number[]): number => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const fmt = (x: number): string => Math.round(x).toLocaleString("en-US");

/** Measures the three subjects on one store; `sent` counts the statements its client sent. */
async function measure(label: string, store: RateLimitStore, sent: { n: number }): Promise<string[]> {
  const s = subjects(store, `b${Date.now().toString(36)}:`);
  const trips: Partial<Record<Subject, number>> = {};
  const c1: Record<Subject, number[]> = { compound: [], ordered: [], "4 × limit()": [] };
  const c16: Record<Subject, number[]> = { compound: [], ordered: [], "4 × limit()": [] };
  for (const name of NAMES) {
    await loop(s[name], 1000, 16); // every key's row exists; connections open
    sent.n = 0;
    await loop(s[name], 500, 1);
    trips[name] = sent.n / 500;
  }
  for (let r = 0; r < ROUNDS; r++) {
    for (const name of NAMES) {
      c1[name].push(await loop(s[name], DECISIONS / 4, 1));
      c16[name].push(await loop(s[name], DECISIONS, 16));
    }
  }
  const shown: Record<Subject, string> = {
    compound: "`compound.limit()`, one step",
    ordered: "`compound.limit()`, one by one",
    "4 × limit()": "4 × `limit()`",
  };
  return NAMES.map((name) => `| ${label} | ${shown[name]} | ${trips[name]} | ${fmt(median(c1[name]))} | ${fmt(median(c16[name]))} |`);
}

const rows: string[] = [];

if (WHICH === "all" || WHICH === "postgres") {
  const db = await testDatabase();
  const sent = { n: 0 };
  const pool = new pg.Pool({ ...db.connection, max: POOL });
  pool.on("error", () => undefined);
  const query = pool.query.bind(pool) as (...args: unknown[]) => unknown;
  (pool as unknown as { query: unknown }).query = (...args: unknown[]) => (sent.n++, query(...args));
  try {
    const store = postgresStore({ client: pool, unlogged: true });
    await store.migrate();
    rows.push(...await measure("PostgreSQL (UNLOGGED tables)", store, sent));
  } finally {
    await pool.end();
    await db.drop();
  }
}

if (WHICH === "all" || WHICH === "mysql") {
  const db = await mysqlDatabase();
  if (db === undefined) console.log("no MySQL/MariaDB server: skipped");
  else {
    const sent = { n: 0 };
    const pool = db.pool({ connectionLimit: POOL });
    const [[{ v }]] = (await pool.query("SELECT version() AS v")) as unknown as [[{ v: string }]];
    for (const method of ["query", "execute"] as const) {
      const original = pool[method].bind(pool) as (...args: unknown[]) => unknown;
      (pool as unknown as Record<string, unknown>)[method] = (...args: unknown[]) => (sent.n++, original(...args));
    }
    try {
      const store = mysqlStore({ client: pool, database: db.database });
      await store.migrate();
      rows.push(...await measure(/mariadb/i.test(v) ? `MariaDB ${v.split("-")[0]}` : `MySQL ${v}`, store, sent));
    } finally {
      await db.drop();
    }
  }
}

if (WHICH === "all" || WHICH === "dynamodb") {
  const server = await startDynalite();
  try {
    const client = server.client();
    await createTable(client, { table: "bench" });
    const store = dynamoDBStore({ client, table: "bench" });
    const sent = {
      get n() {
        return store.stats.requests;
      },
      set n(_: number) {
        store.stats.reset();
      },
    };
    rows.push(...await measure("DynamoDB (dynalite)", store, sent));
  } finally {
    await server.stop();
  }
}

if (WHICH === "all" || WHICH === "deno-kv") {
  const { openKv } = await import("@deno/kv");
  const kv = await openKv(databasePath()) as unknown as KvDatabase & { close(): void };
  const sent = { n: 0 };
  const counted: KvDatabase = {
    get: (key) => (sent.n++, kv.get(key)),
    getMany: (keys) => (sent.n++, kv.getMany!(keys)),
    delete: (key) => (sent.n++, kv.delete(key)),
    atomic: () => {
      const op = kv.atomic();
      const commit = op.commit.bind(op);
      op.commit = () => (sent.n++, commit());
      return op;
    },
  };
  try {
    rows.push(...await measure("Deno KV (@deno/kv, local)", denoKvStore({ kv: counted }), sent));
  } finally {
    kv.close();
  }
}

console.log(
  `node ${process.version}, ${os.cpus().length} CPUs, load ${os.loadavg().map((l) => l.toFixed(1)).join(" ")}; ${ROUNDS} rounds, median\n`,
);
console.log("| store | 4 dimensions decided by | round trips per decision | decisions/s, 1 in flight | decisions/s, 16 in flight |");
console.log("|---|---|---|---|---|");
for (const row of rows) console.log(row);
