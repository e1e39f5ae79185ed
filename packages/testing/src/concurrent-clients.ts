import { describe, expect, it } from "vitest";
import { createRateLimiter, type RateLimiter } from "@floodgate/core";
import { type ContractContext, hourly, kindsOf, uniquePrefix } from "./support.ts";

/** Calls racing on one key through `clients` store instances: exactly the limit is admitted. */
export function concurrentClientTests(ctx: ContractContext, clients: number): void {
  const CALLS = 200;
  const LIMIT = 20;

  /** `clients` limiters of `policy` on one prefix, each over its own store instance. */
  const limiters = (make: (prefix: string, store: ReturnType<ContractContext["harness"]["store"]>) => RateLimiter): RateLimiter[] => {
    const prefix = uniquePrefix();
    return Array.from({ length: clients }, () => make(prefix, ctx.harness.store("server")));
  };

  describe(`${clients} clients racing on one key`, () => {
    it.each(kindsOf(ctx))(`${CALLS} concurrent calls admit exactly ${LIMIT}: %s`, async (kind) => {
      const all = limiters((prefix, store) => createRateLimiter({ policy: hourly(kind, LIMIT), store, prefix }));
      const decisions = await Promise.all(Array.from({ length: CALLS }, (_, i) => all[i % clients]!.limit("hot")));
      expect(decisions.filter((d) => d.allowed)).toHaveLength(LIMIT);
      expect((await all[0]!.peek("hot")).remaining).toBe(0);
    });

    it(`several policies: exactly the tightest limit, every policy charged alike`, async () => {
      const policies = kindsOf(ctx).map((kind, i) => hourly(kind, LIMIT + i, `p${i}`));
      const all = limiters((prefix, store) => createRateLimiter({ policy: policies, store, prefix }));
      const decisions = await Promise.all(Array.from({ length: CALLS }, (_, i) => all[i % clients]!.limit("hot")));
      expect(decisions.filter((d) => d.allowed)).toHaveLength(LIMIT);
      expect((await all[0]!.peek("hot")).policies.map((p) => p.remaining)).toEqual(policies.map((p) => p.limit - LIMIT));
    });
  });
}
