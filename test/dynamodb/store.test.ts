/**
 * What the DynamoDB store promises beyond the contract, on a real DynamoDB-compatible server:
 * requests per decision, the TTL attribute on every item, the document client, errors that name
 * the fix (missing table, missing permission, bad options), foreign items, leased mode.
 */
import { GetItemCommand, PutItemCommand } from "@aws-sdk/client-dynamodb";
import { DynamoDBDocumentClient } from "@aws-sdk/lib-dynamodb";
import { createRateLimiter, fixedWindow, slidingLog, slidingWindow, tokenBucket } from "@floodgate/core";
import { createTable, dynamoDBStore, type DynamoDBStoreOptions } from "@floodgate/dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { example, KINDS, WINDOWED_KINDS } from "../support/kinds.ts";
import { hourly, uniquePrefix } from "../stores/store-contract.ts";
import { type Dynalite, startDynalite } from "./dynalite.ts";

const TABLE = "rate-limits";
let server: Dynalite;
let published: Dynalite;
beforeAll(async () => {
  [server, published] = await Promise.all([startDynalite(), startDynalite({ aws: false })]);
  await createTable(server.client(), { table: TABLE });
  await createTable(published.client(), { table: TABLE }).catch(() => undefined);
});
afterAll(async () => {
  await server?.stop();
  await published?.stop();
});

const store = (options: Partial<DynamoDBStoreOptions> = {}, on = server) =>
  dynamoDBStore({ client: on.client(), table: TABLE, ...options });

async function rawItem(key: string): Promise<Record<string, { S?: string; N?: string }> | undefined> {
  const out = await server.client().send(new GetItemCommand({ TableName: TABLE, Key: { pk: { S: key } }, ConsistentRead: true }));
  return out.Item as Record<string, { S?: string; N?: string }> | undefined;
}

describe("requests per decision", () => {
  it.each(KINDS)("exact mode, one instance: one conditional write per admission, one read per denial: %s", async (kind) => {
    const s = store();
    const limiter = createRateLimiter({ policy: hourly(kind, 5), store: s, prefix: uniquePrefix() });
    for (let i = 0; i < 5; i++) {
      s.stats.reset();
      expect((await limiter.limit("k")).allowed).toBe(true);
      expect([s.stats.requests, s.stats.reads, s.stats.conflicts]).toEqual([1, 0, 0]);
    }
    s.stats.reset();
    expect((await limiter.limit("k")).allowed).toBe(false);
    // A denial on a remembered state is confirmed by a consistent read, and writes nothing.
    expect([s.stats.requests, s.stats.reads]).toEqual([1, 1]);
  });

  it("a second instance: its first write fails on the version and brings the item back (ALL_OLD), the retry succeeds", async () => {
    const prefix = uniquePrefix();
    const [a, b] = [store(), store()];
    const limiters = [a, b].map((s) => createRateLimiter({ policy: slidingWindow({ limit: 10, window: "1h" }), store: s, prefix }));
    await limiters[0]!.limit("k");
    expect((await limiters[1]!.limit("k")).remaining).toBe(8);
    expect([b.stats.requests, b.stats.conflicts, b.stats.reads]).toEqual([2, 1, 0]);
    // The first instance's remembered state is stale now: one failed write, then the write.
    a.stats.reset();
    expect((await limiters[0]!.limit("k")).remaining).toBe(7);
    expect([a.stats.requests, a.stats.conflicts, a.stats.reads]).toEqual([2, 1, 0]);
  });

  it("where a failed condition returns no item (dynalite as published), the store reads it: one request more", async () => {
    const prefix = uniquePrefix();
    const [a, b] = [store({}, published), store({}, published)];
    const limiters = [a, b].map((s) => createRateLimiter({ policy: slidingWindow({ limit: 10, window: "1h" }), store: s, prefix }));
    await limiters[0]!.limit("k");
    expect((await limiters[1]!.limit("k")).remaining).toBe(8);
    expect([b.stats.requests, b.stats.conflicts, b.stats.reads]).toEqual([3, 1, 1]);
  });

  it("cacheSize 0: every decision on an existing item costs a failed write first", async () => {
    const s = store({ cacheSize: 0 });
    const limiter = createRateLimiter({ policy: fixedWindow({ limit: 10, window: "1h" }), store: s, prefix: uniquePrefix() });
    await limiter.limit("k");
    s.stats.reset();
    await limiter.limit("k");
    expect([s.stats.requests, s.stats.conflicts]).toEqual([2, 1]);
  });

  it("leased mode: most decisions need no request at all, and none over-admits", async () => {
    const s = store();
    const prefix = uniquePrefix();
    const limiter = createRateLimiter({ policy: slidingWindow({ limit: 1000, window: "1h" }), store: s, prefix, mode: "leased" });
    let allowed = 0;
    for (let i = 0; i < 1200; i++) {
      const d = await limiter.limit("k");
      if (d.allowed) allowed++;
      await d.pending;
    }
    await limiter.flush();
    expect(allowed).toBe(1000);
    expect(s.stats.requests).toBeLessThan(300);
    const exact = createRateLimiter({ policy: slidingWindow({ limit: 1000, window: "1h" }), store: store(), prefix });
    expect((await exact.peek("k")).remaining).toBe(0);
  });
});

describe("TTL", () => {
  it.each(WINDOWED_KINDS)("every item carries the TTL attribute: when its state stops mattering, plus the margin: %s", async (kind) => {
    const prefix = uniquePrefix();
    const now = Date.now();
    const policy = example(kind, 5, 60_000);
    const limiter = createRateLimiter({ policy, store: store({ ttlMarginSeconds: 0 }), prefix, clock: () => now });
    await limiter.limit("u", { cost: 2 });
    const item = await rawItem(`${prefix}{u}`);
    const expiresAt = Number(item?.["expiresAt"]?.N);
    const state = JSON.parse(item!["s"]!.S!) as { expiresAtUs: number };
    expect(expiresAt).toBe(Math.ceil(Math.ceil(state.expiresAtUs / 1000) / 1000));
    expect(expiresAt * 1000).toBeGreaterThan(now);
    expect(expiresAt * 1000).toBeLessThanOrEqual(now + 2 * 60_000 + 1000);
    const withMargin = createRateLimiter({ policy, store: store(), prefix, clock: () => now });
    await withMargin.limit("u");
    const after = await rawItem(`${prefix}{u}`);
    const later = JSON.parse(after!["s"]!.S!) as { expiresAtUs: number };
    expect(Number(after?.["expiresAt"]?.N)).toBe(Math.ceil(Math.ceil(later.expiresAtUs / 1000) / 1000) + 900);
    await limiter.reset("u");
    expect(await rawItem(`${prefix}{u}`)).toBeUndefined();
  });

  it("a block, a reservation or a lease keeps the item at least as long as it lasts", async () => {
    const prefix = uniquePrefix();
    const now = Date.now();
    const limiter = createRateLimiter({
      policy: fixedWindow({ limit: 5, window: "1m" }),
      store: store({ ttlMarginSeconds: 0 }),
      prefix,
      clock: () => now,
    });
    await limiter.block("b", "1h");
    expect(Number((await rawItem(`${prefix}{b}`))?.["expiresAt"]?.N) * 1000).toBeGreaterThanOrEqual(now + 3_600_000);
    await limiter.reserve("r", { estimate: 1, ttl: "2h" });
    expect(Number((await rawItem(`${prefix}{r}`))?.["expiresAt"]?.N) * 1000).toBeGreaterThanOrEqual(now + 7_200_000);
  });

  it("an item past its TTL that DynamoDB has not deleted yet (it may take days) decides as the algorithm says", async () => {
    const prefix = uniquePrefix();
    let now = Date.now();
    const limiter = createRateLimiter({
      policy: tokenBucket({ capacity: 2, refillRate: 1 }),
      store: store({ ttlMarginSeconds: 0 }),
      prefix,
      clock: () => now,
    });
    await limiter.limit("t", { cost: 2 });
    now += 86_400_000; // a day later, the item still there
    expect(await rawItem(`${prefix}{t}`)).toBeDefined();
    expect((await limiter.limit("t", { cost: 2 })).allowed).toBe(true);
  });
});

describe("clients, errors and foreign items", () => {
  it("a DynamoDBDocumentClient works as the client", async () => {
    const document = DynamoDBDocumentClient.from(server.client());
    const limiter = createRateLimiter({
      policy: slidingLog({ limit: 2, window: "1h" }),
      store: dynamoDBStore({ client: document, table: TABLE }),
      prefix: uniquePrefix(),
    });
    expect([(await limiter.limit("d")).allowed, (await limiter.limit("d")).allowed, (await limiter.limit("d")).allowed]).toEqual([
      true,
      true,
      false,
    ]);
  });

  it("a missing table: a FloodgateError naming createTable and the guide", async () => {
    const s = dynamoDBStore({ client: server.client(), table: "no-such-table" });
    const error = await Promise.resolve(s.consume({ prefix: "p:", policies: [hourly("fixed-window", 1)] }, "k", 1, Date.now())).catch((
      e: unknown,
    ) => e);
    expect((error as Error).name).toBe("FloodgateError");
    expect((error as Error).message).toMatch(
      /table "no-such-table" does not exist.*createTable\(client, \{ table: "no-such-table" \}\).*docs\/aws-lambda-and-dynamodb\.md/,
    );
  });

  it("a missing permission: a FloodgateError naming the IAM actions", async () => {
    const s = dynamoDBStore({ client: server.client({ accessKeyId: "no-permission" }), table: TABLE });
    const error = await Promise.resolve(s.consume({ prefix: "p:", policies: [hourly("fixed-window", 1)] }, "k", 1, Date.now())).catch((
      e: unknown,
    ) => e);
    expect((error as Error).name).toBe("FloodgateError");
    expect((error as Error).message).toContain("refused PutItem");
    expect((error as Error).message).toContain("dynamodb:GetItem, dynamodb:PutItem, dynamodb:DeleteItem");
    expect((error as Error).message).toContain("not authorized to perform: dynamodb:PutItem");
  });

  it.each([
    [{ table: "x" }, "invalid option `table`"],
    [{ table: TABLE, client: {} }, "invalid option `client`"],
    [{ table: TABLE, cacheSize: -1 }, "invalid option `cacheSize`"],
    [{ table: TABLE, ttlAttribute: "v" }, "invalid option `ttlAttribute`"],
    [{ table: TABLE, ttlMarginSeconds: 1.5 }, "invalid option `ttlMarginSeconds`"],
    [{ table: TABLE, region: "eu-west-1" }, "invalid option `region`"],
  ])("bad options are refused at construction: %j", (options, message) => {
    expect(() => dynamoDBStore({ client: server.client(), ...options } as DynamoDBStoreOptions)).toThrow(message);
  });

  it("an item another program wrote under the key reads as no state, and is replaced only while it stays as read", async () => {
    const prefix = uniquePrefix();
    await server.client().send(new PutItemCommand({ TableName: TABLE, Item: { pk: { S: `${prefix}{f}` }, other: { S: "data" } } }));
    const limiter = createRateLimiter({ policy: fixedWindow({ limit: 3, window: "1h" }), store: store(), prefix });
    expect((await limiter.limit("f")).remaining).toBe(2);
    expect((await rawItem(`${prefix}{f}`))?.["other"]).toBeUndefined();
  });

  it("keys DynamoDB cannot store as they are: lone surrogates spelled out, very long keys digested, each its own item", async () => {
    const prefix = uniquePrefix();
    const limiter = createRateLimiter({ policy: fixedWindow({ limit: 1, window: "1h" }), store: store(), prefix });
    const long = "é".repeat(1000);
    for (const key of ["a\\ud800", "a\uD800", long, `${long}x`]) expect((await limiter.limit(key)).allowed, key).toBe(true);
    expect((await limiter.limit(long)).allowed).toBe(false);
  });
});
