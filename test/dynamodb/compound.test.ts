/**
 * The DynamoDB store's compound step (`consumeMany`: one TransactWriteItems, each item under the
 * condition of its version), on dynalite with transactions added at the server as DynamoDB
 * documents them (fixtures/dynalite-server.cjs): it answers as the memory store's step does;
 * 4 store instances (each its own remembered versions, as 4 processes) × 4 concurrent callers,
 * naming their keys in opposite orders, admit exactly the limit in every dimension; a decision is
 * one request once the items are known, where the ordered path sends one per dimension; and on a
 * server without transactions the limiter decides the pairs one by one.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCompoundLimiter, createRateLimiter, fixedWindow, type RateLimitStore } from "../../packages/core/src/index.ts";
import { createTable, dynamoDBStore } from "@floodgate/dynamodb";
import { uniquePrefix } from "../stores/store-contract.ts";
import { expectLikeMemory, raceCompound } from "../compound/store-steps.ts";
import { KINDS } from "../support/kinds.ts";
import { type Dynalite, startDynalite } from "./dynalite.ts";

describe("dynamoDBStore consumeMany", () => {
  let server: Dynalite;
  let published: Dynalite;
  beforeAll(async () => {
    [server, published] = await Promise.all([startDynalite(), startDynalite({ aws: false })]);
    await createTable(server.client(), { table: "many" });
    await createTable(published.client(), { table: "many" }).catch(() => undefined);
  }, 60_000);
  afterAll(async () => {
    await Promise.all([server?.stop(), published?.stop()]);
  });

  it("answers pair by pair as the memory store's compound step, blocks and logs included", async () => {
    await expectLikeMemory(() => dynamoDBStore({ client: server.client(), table: "many" }), 20, KINDS);
  }, 180_000);

  it("4 instances x 4 concurrent callers in opposite orders: exactly the limits", async () => {
    const client = server.client();
    const stores = Array.from({ length: 4 }, () => dynamoDBStore({ client, table: "many" }));
    // One limiter set per instance, over one prefix: raceCompound's dimensions, shared by the four.
    const { paths } = await raceCompound(fanOut(stores), { callers: 16, calls: 30, orgLimit: 100, userLimit: 5 });
    expect([...paths]).toEqual(["store"]);
    expect(stores.reduce((n, s) => n + s.stats.conflicts, 0)).toBeGreaterThan(0); // the instances did race
  }, 180_000);

  it("one request per compound decision once the items are known, where the ordered path sends one per dimension", async () => {
    const store = dynamoDBStore({ client: server.client(), table: "many" });
    const prefix = uniquePrefix();
    const dims = (s: RateLimitStore) =>
      Object.fromEntries(
        ["a", "b", "c", "d"].map((
          d,
        ) => [d, createRateLimiter({ policy: fixedWindow({ limit: 3, window: "1h" }), store: s, prefix: `${prefix}${d}:` })]),
      );
    const keys = { a: "1", b: "2", c: "3", d: "4" };
    const native = createCompoundLimiter({ dimensions: dims(store) });
    expect(native.path).toBe("store");
    expect((await native.limit(keys)).allowed).toBe(true); // new items: assumed absent, written in one transaction
    expect(store.stats.requests).toBe(1);
    store.stats.reset();
    expect((await native.limit(keys)).allowed).toBe(true);
    expect(store.stats.requests).toBe(1);
    const ordered = createCompoundLimiter({ dimensions: dims(withoutCompoundStep(store)) });
    expect(ordered.path).toBe("ordered");
    store.stats.reset();
    expect((await ordered.limit(keys)).allowed).toBe(true);
    expect(store.stats.requests).toBe(4);
    // Refused on items this instance wrote last: read first (a refusal stands on read items), nothing written.
    store.stats.reset();
    expect((await native.limit(keys)).allowed).toBe(false);
    expect(store.stats.reads).toBe(4);
    expect(store.stats.requests).toBe(4);
  });

  it("a server without transactions: the step answers undefined, and the limiter decides the pairs one by one", async () => {
    const store = dynamoDBStore({ client: published.client(), table: "many" });
    const set = { prefix: uniquePrefix(), policies: [fixedWindow({ limit: 1, window: "1h" })] };
    expect(await store.consumeMany([{ set, key: "a" }, { set, key: "b" }], 1, Date.now())).toBeUndefined();
    const prefix = uniquePrefix();
    const dim = (name: string, limit: number) =>
      createRateLimiter({ policy: fixedWindow({ limit, window: "1h" }), store, prefix: `${prefix}${name}:` });
    const [user, org] = [dim("user", 1), dim("org", 5)];
    const compound = createCompoundLimiter({ dimensions: { org, user } });
    expect((await compound.limit({ org: "acme", user: "u" })).allowed).toBe(true);
    const refused = await compound.limit({ org: "acme", user: "u" });
    expect([refused.allowed, refused.dimension]).toEqual([false, "user"]);
    expect((await org.peek("acme")).remaining).toBe(4); // the refusal's charge given back
  });
});

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

/** One store whose calls go to the instances in turn (each instance remembers its own versions). */
function fanOut(stores: readonly RateLimitStore[]): RateLimitStore {
  let next = 0;
  const pick = () => stores[next++ % stores.length]!;
  return {
    name: "dynamodb",
    consume: (...a) => pick().consume(...a),
    peek: (...a) => pick().peek(...a),
    refund: (...a) => pick().refund(...a),
    reset: (...a) => pick().reset(...a),
    consumeMany: (...a) => pick().consumeMany!(...a),
  };
}
