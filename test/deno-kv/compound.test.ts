// The Deno KV store's compound step (`consumeMany`: every key read together, one atomic commit
// checking every versionstamp): it answers as the memory store's step does, every kind included;
// 4 stores on one database (racing each other, as 4 processes do) x 4 concurrent callers, naming
// their keys in opposite orders, admit exactly the limit in every dimension; a decision is one read and one commit, where the ordered
// path reads and commits once per dimension.
//   npx vitest run test/deno-kv/compound.test.ts
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCompoundLimiter, createRateLimiter, fixedWindow, type RateLimitStore } from "../../packages/core/src/index.ts";
import { denoKvStore, type KvDatabase } from "../../packages/deno-kv/src/index.ts";
import { uniquePrefix } from "../stores/store-contract.ts";
import { expectLikeMemory, raceCompound } from "../compound/store-steps.ts";
import { KINDS } from "../support/kinds.ts";
import { type ClosableKv, openKv, runtime } from "./support.ts";

describe(`denoKvStore (${runtime}) consumeMany`, () => {
  let kv: ClosableKv;
  beforeAll(async () => {
    kv = await openKv();
  });
  afterAll(() => kv?.close());

  it("answers pair by pair as the memory store's compound step, blocks and logs included", async () => {
    await expectLikeMemory(() => denoKvStore({ kv }), 30, KINDS);
  }, 120_000);

  it("4 stores (as 4 processes) x 4 concurrent callers in opposite orders: exactly the limits", async () => {
    const stores = Array.from({ length: 4 }, () => denoKvStore({ kv, maxAttempts: 1000, timeoutMs: 60_000 }));
    const { paths } = await raceCompound(fanOut(stores), { callers: 16, calls: 30, orgLimit: 100, userLimit: 5 });
    expect([...paths]).toEqual(["store"]);
    expect(stores.reduce((n, s) => n + s.stats().retries, 0)).toBeGreaterThan(0); // the stores did race
  }, 120_000);

  it("one read and one commit per compound decision, where the ordered path does both per dimension", async () => {
    const sent: string[] = [];
    const counted: KvDatabase = {
      get: (key) => (sent.push("get"), kv.get(key)),
      getMany: (keys) => (sent.push("getMany"), kv.getMany!(keys)),
      delete: (key) => (sent.push("delete"), kv.delete(key)),
      atomic: () => {
        const op = kv.atomic();
        const commit = op.commit.bind(op);
        op.commit = () => (sent.push("commit"), commit());
        return op;
      },
    };
    const store = denoKvStore({ kv: counted });
    const prefix = uniquePrefix();
    const dims = (s: RateLimitStore) =>
      Object.fromEntries(
        ["a", "b", "c", "d"].map((
          d,
        ) => [d, createRateLimiter({ policy: fixedWindow({ limit: 2, window: "1h" }), store: s, prefix: `${prefix}${d}:` })]),
      );
    const keys = { a: "1", b: "2", c: "3", d: "4" };
    const native = createCompoundLimiter({ dimensions: dims(store) });
    expect(native.path).toBe("store");
    expect((await native.limit(keys)).allowed).toBe(true);
    expect(sent).toEqual(["getMany", "commit"]);
    const ordered = createCompoundLimiter({ dimensions: dims(withoutCompoundStep(store)) });
    expect(ordered.path).toBe("ordered");
    sent.length = 0;
    expect((await ordered.limit(keys)).allowed).toBe(true);
    expect(sent).toEqual(["get", "commit", "get", "commit", "get", "commit", "get", "commit"]);
    sent.length = 0;
    // Refused: read, nothing written.
    expect((await native.limit(keys)).allowed).toBe(false);
    expect(sent).toEqual(["getMany"]);
  });
});

/** One store whose calls go to the stores in turn. */
function fanOut(stores: readonly RateLimitStore[]): RateLimitStore {
  let next = 0;
  const pick = () => stores[next++ % stores.length]!;
  return {
    name: "deno-kv",
    consume: (...a) => pick().consume(...a),
    peek: (...a) => pick().peek(...a),
    refund: (...a) => pick().refund(...a),
    reset: (...a) => pick().reset(...a),
    consumeMany: (...a) => pick().consumeMany!(...a),
  };
}

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
