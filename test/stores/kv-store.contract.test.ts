import { describe, expect, it } from "vitest";
import { createRateLimiter } from "../../packages/core/src/index.ts";
import { KINDS } from "../support/kinds.ts";
import { type CompareAndSetKV, kvStore } from "../../examples/custom-store/kv-store.ts";
import { VersionedMap } from "../../examples/custom-store/versioned-map.ts";
import { hourly, storeContract, uniquePrefix } from "./store-contract.ts";

// One database for every store instance the suite makes: its racing clients share it.
storeContract("kvStore (compare-and-set over evaluateState)", async () => {
  const db = new VersionedMap();
  return { store: () => kvStore(db), close: async () => undefined };
});

describe("kvStore under concurrency", () => {
  const LIMIT = 10;
  const CALLERS = 200;

  it.each(KINDS)(`${CALLERS} interleaved consumers on one key admit exactly ${LIMIT}: %s`, async (kind) => {
    const store = kvStore(new VersionedMap());
    const limiter = createRateLimiter({ policy: hourly(kind, LIMIT), store, prefix: uniquePrefix() });
    const decisions = await Promise.all(Array.from({ length: CALLERS }, () => limiter.limit("hot")));
    expect(decisions.filter((d) => d.allowed)).toHaveLength(LIMIT);
    // The callers did race: writes were refused and decided again.
    expect(store.conflicts).toBeGreaterThan(0);
    expect((await limiter.peek("hot")).remaining).toBe(0);
  });

  it("several policies: exactly the tightest limit, every policy charged alike", async () => {
    const store = kvStore(new VersionedMap());
    const policies = KINDS.map((kind, i) => hourly(kind, LIMIT + i, `p${i}`));
    const limiter = createRateLimiter({ policy: policies, store, prefix: uniquePrefix() });
    const decisions = await Promise.all(Array.from({ length: CALLERS }, (_, i) => limiter.limit("hot", { cost: 1 + (i % 2) })));
    const charged = decisions.reduce((sum, d, i) => (d.allowed ? sum + 1 + (i % 2) : sum), 0);
    expect(charged).toBeGreaterThanOrEqual(LIMIT - 1);
    expect(charged).toBeLessThanOrEqual(LIMIT);
    expect((await limiter.peek("hot")).policies.map((p) => p.remaining)).toEqual(policies.map((p) => p.limit - charged));
  });

  it("without the version check the same race over-admits (what the compare-and-set prevents)", async () => {
    const map = new VersionedMap();
    const blind: CompareAndSetKV = {
      get: (key) => map.get(key),
      setIf: async (key, _version, value, expiresAtMs) => map.setIf(key, (await map.get(key)).version, value, expiresAtMs),
      delete: (key) => map.delete(key),
    };
    const limiter = createRateLimiter({ policy: hourly("fixed-window", LIMIT), store: kvStore(blind), prefix: uniquePrefix() });
    const decisions = await Promise.all(Array.from({ length: CALLERS }, () => limiter.limit("hot")));
    expect(decisions.filter((d) => d.allowed).length).toBeGreaterThan(LIMIT);
  });

  it("a value another program wrote under the key reads as no state", async () => {
    const map = new VersionedMap();
    const prefix = uniquePrefix();
    const limiter = createRateLimiter({ policy: hourly("sliding-log", 3), store: kvStore(map), prefix });
    for (
      const garbage of [
        "not json",
        "42",
        "null",
        JSON.stringify({ v: 1, kinds: "sliding-log", expiresAtUs: 1, numbers: [0, 5, 9], logs: [[1]] }),
      ]
    ) {
      map.put(`${prefix}{g}`, garbage);
      const d = await limiter.limit("g");
      expect([d.allowed, d.remaining], garbage).toEqual([true, 2]);
    }
  });
});
