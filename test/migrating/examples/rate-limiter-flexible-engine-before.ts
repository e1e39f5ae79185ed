import { RateLimiterMemory, RateLimiterRes } from "rate-limiter-flexible";

/** A budget of 10 units per minute and user, for work that is not an HTTP request (jobs, messages). */
export function createBudget(): (user: string, units: number) => Promise<{ ok: boolean; waitMs: number }> {
  const limiter = new RateLimiterMemory({ points: 10, duration: 60 });
  return async (user, units) => {
    try {
      await limiter.consume(user, units);
      return { ok: true, waitMs: 0 };
    } catch (rejection) {
      if (rejection instanceof RateLimiterRes) return { ok: false, waitMs: rejection.msBeforeNext };
      throw rejection;
    }
  };
}
