import { createRateLimiter, fixedWindow } from "@floodgate/core";

/** A budget of 10 units per minute and user, for work that is not an HTTP request (jobs, messages). */
export function createBudget(): (user: string, units: number) => Promise<{ ok: boolean; waitMs: number }> {
  const limiter = createRateLimiter({ policy: fixedWindow({ limit: 10, window: "1m" }) });
  return async (user, units) => {
    const decision = await limiter.limit(user, { cost: units }); // resolves when denied too
    return { ok: decision.allowed, waitMs: decision.retryAfterMs };
  };
}
