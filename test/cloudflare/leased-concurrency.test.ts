// Leased mode under heavy concurrency inside workerd: many Worker requests at once on one hot
// key of one isolate, with 20 ms between the Worker and its object (as across Cloudflare's
// network), so that lease calls are in flight while other requests arrive and the thread goes
// idle meanwhile. workerd cancels a request that waits only on a promise another request's I/O
// will settle ("the Worker's code had hung"), and I/O made on behalf of another request fails:
// every request must answer on its own, and the limit must hold.
//   npm run build -w packages/core -w packages/cloudflare && npx vitest run test/cloudflare/leased-concurrency.test.ts
import type { Miniflare } from "miniflare";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { uniquePrefix } from "../stores/store-contract.ts";
import { post, requestsOf, startWorkers } from "./harness.ts";

const LATENCY_MS = 20;

describe("durableObjectStore in workerd: leased mode, concurrent requests while a lease call is in flight", () => {
  let mf: Miniflare;
  beforeAll(async () => {
    mf = await startWorkers();
  });
  afterAll(async () => {
    await mf?.dispose();
  });

  /** One decision in Worker "a": its status and body as the runtime answered them (a cancelled request answers no JSON). */
  async function one(body: Record<string, unknown>): Promise<{ status: number; text: string }> {
    const fetcher = await mf.getWorker("a");
    const response = await fetcher.fetch("http://worker.test/limit", { method: "POST", body: JSON.stringify(body) });
    return { status: response.status, text: await response.text() };
  }

  /** Runs `waves` waves of `size` concurrent requests; answers the replies that were not a decision, and the admissions. */
  async function storm(body: Record<string, unknown>, waves: number, size: number): Promise<{ failures: string[]; admitted: number }> {
    const failures: string[] = [];
    let admitted = 0;
    for (let w = 0; w < waves; w++) {
      const replies = await Promise.all(Array.from({ length: size }, () => one(body)));
      for (const r of replies) {
        let decision: { allowed?: boolean } | undefined;
        try {
          decision = JSON.parse(r.text);
        } catch {
          // not JSON: a response the runtime made
        }
        if (r.status !== 200 || typeof decision?.allowed !== "boolean") failures.push(`${r.status}: ${r.text.slice(0, 200)}`);
        else if (decision.allowed) admitted++;
      }
    }
    return { failures, admitted };
  }

  it("500 requests in waves of 100 on a hot key: every one answered by its own request, all admitted within the limit", async () => {
    const body = { set: "fixed-window", limit: 10_000, prefix: uniquePrefix(), mode: "leased", key: "hot", latencyMs: LATENCY_MS };
    const before = await requestsOf(mf, "a");
    // A few one at a time: leased mode sizes a lease from the rate it has seen.
    for (let i = 0; i < 10; i++) expect((await post(mf, "a", "/limit", body)).allowed).toBe(true);
    const { failures, admitted } = await storm(body, 5, 100);
    expect(failures).toEqual([]);
    expect(admitted).toBe(500);
    // Leases still serve most decisions: far fewer DO requests than decisions.
    expect((await requestsOf(mf, "a")) - before).toBeLessThan(255);
    // Every unit accounted for: the unspent go back, and exactly the 510 admitted stay charged.
    await post(mf, "a", "/flush", {});
    const after = await post(mf, "a", "/peek", { set: "fixed-window", limit: 10_000, prefix: body.prefix, key: "hot" });
    expect(after.remaining).toBe(10_000 - 510);
  }, 120_000);

  it("a burst after the lease ran out: the requests waiting on one request's lease call all answer, from its lease", async () => {
    const body = { set: "fixed-window", limit: 10_000, prefix: uniquePrefix(), mode: "leased", key: "hot", latencyMs: 50 };
    for (let i = 0; i < 10; i++) expect((await post(mf, "a", "/limit", body)).allowed).toBe(true);
    // Past the lease's life (5 s by default): the burst's first request asks the store, and the
    // others arrive while that call (50 ms away) is in flight.
    await new Promise((resolve) => setTimeout(resolve, 5500));
    const before = await requestsOf(mf, "a");
    const replies = await Promise.all(Array.from({ length: 100 }, () => one(body)));
    const sources: Record<string, number> = {};
    for (const r of replies) {
      expect(r.status, r.text).toBe(200);
      const d = JSON.parse(r.text) as { allowed: boolean; source: string };
      expect(d.allowed).toBe(true);
      sources[d.source] = (sources[d.source] ?? 0) + 1;
    }
    // Most were served from the lease the in-flight call brought, after waiting on it in their own request.
    expect(sources.lease ?? 0).toBeGreaterThan(50);
    expect((await requestsOf(mf, "a")) - before).toBeLessThan(20);
  }, 60_000);

  it("a limit of 100 under 500 concurrent requests: exactly 100 admitted, none cancelled", async () => {
    const body = { set: "fixed-window", limit: 100, prefix: uniquePrefix(), mode: "leased", key: "hot", latencyMs: LATENCY_MS };
    for (let i = 0; i < 10; i++) expect((await post(mf, "a", "/limit", body)).allowed).toBe(true);
    const { failures, admitted } = await storm(body, 5, 100);
    expect(failures).toEqual([]);
    expect(admitted).toBe(90);
  }, 120_000);

  /** The next decision on `body`'s key, or status 0 when none came within 20 s (a request stranded on another's call). */
  function nextOf(body: Record<string, unknown>): Promise<{ status: number; text: string }> {
    return Promise.race([
      one(body),
      new Promise<{ status: number; text: string }>((resolve) =>
        setTimeout(() => resolve({ status: 0, text: "no answer in 20 s" }), 20_000)
      ),
    ]);
  }

  it("a request whose client goes away mid-call strands no other: the next request on the key answers", async () => {
    // 500 ms between Worker and object, within the store's 1 s deadline: the first request's call
    // is in flight when its client leaves. (A latency at the deadline makes every call a race
    // with its own timeout, which it loses in some runs: a 500 with STORE_TIMEOUT.)
    const body = { set: "fixed-window", limit: 10_000, prefix: uniquePrefix(), mode: "leased", key: "hot", latencyMs: 500 };
    const fetcher = await mf.getWorker("a");
    const controller = new AbortController();
    const first = fetcher.fetch("http://worker.test/limit", {
      method: "POST",
      body: JSON.stringify(body),
      signal: controller.signal as never,
    })
      .then(() => "answered", () => "aborted");
    await new Promise((resolve) => setTimeout(resolve, 200));
    controller.abort();
    expect(await first).toBe("aborted");
    // The next request finds the first one's call in flight (or settled): it must answer, not wait forever.
    const next = await nextOf(body);
    expect(next.status, next.text).toBe(200);
    expect(JSON.parse(next.text).allowed).toBe(true);
  }, 60_000);

  it("a request that ends while its lease call is in flight strands no other: the next requests answer, and the units add up", async () => {
    // The first request answers before its decision (workerd then cancels its call, which never
    // settles); the next ones arrive while that call is in flight and wait on it, on a timer of
    // their own, for at most the store's deadline, then call the store themselves.
    const body = { set: "fixed-window", limit: 10_000, prefix: uniquePrefix(), mode: "leased", key: "hot", latencyMs: 300 };
    const first = await one({ ...body, early: true });
    expect(JSON.parse(first.text)).toEqual({ early: true });
    const replies = await Promise.all(Array.from({ length: 5 }, () => nextOf(body)));
    for (const r of replies) {
      expect(r.status, r.text).toBe(200);
      expect(JSON.parse(r.text).allowed).toBe(true);
    }
    // And after them, the key is not stranded: one more, then every unit accounted for (the
    // cancelled call never reached the object, or charged its own request: 6 or 7).
    expect((await nextOf(body)).status).toBe(200);
    await post(mf, "a", "/flush", {});
    const after = await post(mf, "a", "/peek", { set: "fixed-window", limit: 10_000, prefix: body.prefix, key: "hot" });
    expect([10_000 - 6, 10_000 - 7]).toContain(after.remaining);
  }, 60_000);
});
