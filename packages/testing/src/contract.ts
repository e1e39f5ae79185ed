import { createRateLimiter } from "@floodgate/core";
import { POLICY_KINDS, type StoreResult } from "@floodgate/core/store";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { blockTests } from "./blocks.ts";
import { compoundTests } from "./compound.ts";
import { concurrentClientTests } from "./concurrent-clients.ts";
import { decisionTests } from "./decisions.ts";
import { leaseTests } from "./leases.ts";
import { reservationTests } from "./reservations.ts";
import { severalPolicyTests } from "./several-policies.ts";
import {
  clearOfHourBoundary,
  type ContractContext,
  example,
  type StoreContractOptions,
  type StoreHarness,
  uniquePrefix,
} from "./support.ts";

/** The capabilities a switch leaves out, and the store methods each needs. */
const CAPABILITIES = [
  ["reservations", ["reserve", "settle"]],
  ["leases", ["lease"]],
  ["blocks", ["block", "unblock", "penalty"]],
] as const;

/**
 * Runs the whole store contract against a store: decisions for every kind against what the
 * algorithms define, refunds into the charged window, several policies atomically, blocks and
 * penalties, reservations, leases, and calls racing from several clients. Call it at the top level
 * of a test file; `setup` runs once, before the suite's first test.
 *
 * @param name - shown in the suite's name
 * @param setup - makes the harness: fresh stores, and a way to close what it started
 * @param options - what the store does not implement (each switch leaves out those tests)
 * @example
 * import { storeContract } from "@floodgate/testing";
 * storeContract("my store", async () => ({ store: () => myStore(client), close: () => client.quit() }));
 */
export function storeContract(name: string, setup: () => Promise<StoreHarness>, options: StoreContractOptions = {}): void {
  describe(`store contract: ${name}`, () => {
    const ctx = { options } as ContractContext;
    beforeAll(async () => {
      ctx.harness = await setup();
      ctx.server = ctx.harness.store("server");
      ctx.local = ctx.harness.store("local");
    });
    beforeEach(() => clearOfHourBoundary());
    afterAll(async () => {
      await ctx.server?.dispose?.();
      await ctx.local?.dispose?.();
      await ctx.harness?.close();
    });

    it("implements every operation it does not switch off", () => {
      for (const [capability, methods] of CAPABILITIES) {
        if (options[capability] === false) continue;
        for (const method of methods) {
          const store = ctx.server as unknown as Record<string, unknown>;
          expect(typeof store[method], `the store has no \`${method}\`: implement it, or pass { ${capability}: false }`).toBe("function");
        }
      }
    });

    if (options.kinds !== undefined) {
      it("refuses, at limiter creation, a policy of a kind it does not decide", () => {
        for (const kind of POLICY_KINDS.filter((k) => !options.kinds!.includes(k))) {
          const policy = example(kind, 2, 10_000);
          expect(() => createRateLimiter({ policy, store: ctx.server })).toThrow(
            new RegExp(`kind "${kind}", which the .* store does not implement`),
          );
        }
      });
    }

    it("a store declaring notesDenials tells the call's signal of a denial before answering, of no admission", async () => {
      const store = ctx.local;
      if (store.notesDenials !== true) return;
      const set = { prefix: uniquePrefix(), policies: [example("fixed-window", 1, 3_600_000)] };
      const seen: StoreResult[] = [];
      const signal = { aborted: false, denied: (result: StoreResult) => void seen.push(result) };
      const t = 1_700_000_000_000;
      expect((await store.consume(set, "k", 1, t, signal))[0]).toBe(1);
      expect(seen).toHaveLength(0);
      for (let i = 0; i < 2; i++) {
        let seenAtAnswer = -1;
        const answer = await Promise.resolve(store.consume(set, "k", 1, t, signal)).then((r) => {
          seenAtAnswer = seen.length;
          return r;
        });
        expect(answer[0]).toBe(0);
        expect(seenAtAnswer).toBe(i + 1);
        expect(seen[i]).toEqual(answer);
      }
    });

    decisionTests(ctx);
    if (options.blocks !== false) blockTests(ctx);
    severalPolicyTests(ctx);
    compoundTests(ctx);
    if (options.reservations !== false) reservationTests(ctx);
    if (options.leases !== false) leaseTests(ctx);
    if (options.clients !== false) concurrentClientTests(ctx, options.clients ?? 4);
  });
}
