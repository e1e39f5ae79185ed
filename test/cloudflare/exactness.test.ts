// Cross-client exactness on Durable Objects in workerd: limit 100, 1,000 concurrent Worker
// requests on one key, spread over two Workers (two isolates, each with its own limiter), for
// every kind and for a set of several policies: exactly 100 admitted; leased mode with a small
// fraction of the DO requests. Also: state survives a
// restart of the runtime with persistence on, and the alarm deletes expired keys.
//   npm run build -w packages/core -w packages/cloudflare && npx vitest run test/cloudflare
import type { Miniflare } from "miniflare";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRateLimiter, fixedWindow } from "../../packages/core/src/index.ts";
import { uniquePrefix } from "../stores/store-contract.ts";
import { bridgedStore, post, requestsOf, startWorkers } from "./harness.ts";

const CALLS = 1000;
const LIMIT = 100;
const SETS = ["token-bucket", "fixed-window", "sliding-window", "sliding-log", "concurrency", "multi"] as const;

describe("durableObjectStore in workerd: 1,000 concurrent requests from two Workers on one key", () => {
  let mf: Miniflare;
  beforeAll(async () => {
    mf = await startWorkers();
  });
  afterAll(async () => {
    await mf?.dispose();
  });

  /** `CALLS` requests at once, alternating between the Workers; answers how many were admitted. */
  async function storm(set: string, mode: "exact" | "leased", shards?: number): Promise<number> {
    const prefix = uniquePrefix();
    const replies = await Promise.all(
      Array.from(
        { length: CALLS },
        (_, i) => post(mf, i % 2 === 0 ? "a" : "b", "/limit", { set, limit: LIMIT, prefix, mode, shards, key: "hot" }),
      ),
    );
    return replies.filter((r) => r.allowed).length;
  }

  for (const set of SETS) {
    it(`exact mode, ${set}: exactly ${LIMIT} admitted`, async () => {
      const before = (await requestsOf(mf, "a")) + (await requestsOf(mf, "b"));
      expect(await storm(set, "exact")).toBe(LIMIT);
      // One DO request per decision in exact mode.
      expect((await requestsOf(mf, "a")) + (await requestsOf(mf, "b")) - before).toBe(CALLS);
    }, 120_000);
  }

  it("exact mode behind withDenyCache: exactly 100 admitted, known denials answered with no DO request", async () => {
    const prefix = uniquePrefix();
    const one = (i: number) =>
      post(mf, i % 2 === 0 ? "a" : "b", "/limit", {
        set: "fixed-window",
        limit: LIMIT,
        prefix,
        mode: "exact",
        key: "hot",
        denyCache: true,
      });
    const before = (await requestsOf(mf, "a")) + (await requestsOf(mf, "b"));
    let admitted = 0;
    // In waves, so that each isolate has seen a denial before most of its calls.
    for (let wave = 0; wave < 10; wave++) {
      const replies = await Promise.all(Array.from({ length: CALLS / 10 }, (_, i) => one(i)));
      admitted += replies.filter((r) => r.allowed).length;
    }
    expect(admitted).toBe(LIMIT);
    expect((await requestsOf(mf, "a")) + (await requestsOf(mf, "b")) - before).toBeLessThan(CALLS / 2);
  }, 120_000);

  it("exact mode over 4 shards, a set of several policies: exactly 100 admitted", async () => {
    expect(await storm("multi", "exact", 4)).toBe(LIMIT);
  }, 120_000);

  for (const set of ["fixed-window", "multi-leasable"] as const) {
    it(`leased mode, ${set}: 1,000 concurrent decisions with a small fraction of the DO requests, every unit accounted for`, async () => {
      const prefix = uniquePrefix();
      const limit = 10_000;
      const one = (worker: "a" | "b") => post(mf, worker, "/limit", { set, limit, prefix, mode: "leased", key: "hot" });
      const before = (await requestsOf(mf, "a")) + (await requestsOf(mf, "b"));
      // A few requests first: leased mode sizes a lease from the rate it has seen.
      for (let i = 0; i < 10; i++) for (const w of ["a", "b"] as const) expect((await one(w)).allowed).toBe(true);
      const replies = await Promise.all(Array.from({ length: CALLS - 20 }, (_, i) => one(i % 2 === 0 ? "a" : "b")));
      expect(replies.every((r) => r.allowed)).toBe(true);
      const requests = (await requestsOf(mf, "a")) + (await requestsOf(mf, "b")) - before;
      expect(requests).toBeLessThan(CALLS / 10);
      // Unspent units go back: exactly the 1,000 admitted stay charged to the window (a bucket
      // that granted since a lease was charged takes back less: no refund moves its time back).
      for (const w of ["a", "b"] as const) await post(mf, w, "/flush", {});
      const after = await post(mf, "a", "/peek", { set, limit, prefix, key: "hot" });
      expect(after.policies[set === "multi-leasable" ? "fw" : Object.keys(after.policies)[0]!]).toBe(limit - CALLS);
      expect(after.remaining).toBeLessThanOrEqual(limit - CALLS);
    }, 120_000);
  }
});

describe("durableObjectStore in workerd: persistence and expiry", () => {
  const dir = mkdtempSync(join(tmpdir(), "floodgate-do-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("state survives a restart of the runtime with persistence on", async () => {
    const prefix = uniquePrefix();
    const policy = fixedWindow({ limit: 5, window: "1h" });
    let mf = await startWorkers(dir);
    try {
      const limiter = createRateLimiter({ policy, store: bridgedStore(mf, "a", "object"), prefix });
      for (let i = 0; i < 3; i++) expect((await limiter.limit("survivor")).allowed).toBe(true);
    } finally {
      await mf.dispose();
    }
    mf = await startWorkers(dir);
    try {
      const limiter = createRateLimiter({ policy, store: bridgedStore(mf, "b", "object"), prefix });
      expect((await limiter.peek("survivor")).remaining).toBe(2);
      expect((await limiter.limit("survivor", { cost: 2 })).allowed).toBe(true);
      expect((await limiter.limit("survivor")).allowed).toBe(false);
    } finally {
      await mf.dispose();
    }
  }, 120_000);

  it("the alarm deletes keys once they expire: storage holds only active keys", async () => {
    const mf = await startWorkers();
    try {
      // One shard: every key in one object, whose size the Worker reports.
      const limiter = createRateLimiter({
        policy: fixedWindow({ limit: 5, window: "3s" }),
        store: bridgedStore(mf, "a", "object", 1),
        prefix: uniquePrefix(),
      });
      const keep = createRateLimiter({
        policy: fixedWindow({ limit: 5, window: "1h" }),
        store: bridgedStore(mf, "a", "object", 1),
        prefix: uniquePrefix(),
      });
      // Just after a 3 s boundary, so that no window ends before the count is read.
      await new Promise((resolve) => setTimeout(resolve, 3000 - (Date.now() % 3000) + 50));
      await Promise.all(Array.from({ length: 20 }, (_, i) => limiter.limit(`short-${i}`)));
      await keep.limit("long");
      expect(await keyCount(mf)).toBe(21);
      await new Promise((resolve) => setTimeout(resolve, 4000));
      expect(await keyCount(mf)).toBe(1);
      expect((await keep.peek("long")).remaining).toBe(4);
    } finally {
      await mf.dispose();
    }
  }, 60_000);
});

/** Keys held by the one object of a single-shard store. */
async function keyCount(mf: Miniflare): Promise<number> {
  return (await post(mf, "a", "/keys", { shards: 1 })).keys;
}
