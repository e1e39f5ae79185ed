// Vitest only: it needs a fresh module graph (vi.resetModules), which Deno and Bun cannot give.
// workerd's suite proves the same at a real Worker's global scope.
import { describe, expect, it, vi } from "vitest";

describe("safe at global scope (edge runtimes forbid timers and I/O there)", () => {
  it("importing core and creating a store and limiter schedules no timer", async () => {
    vi.resetModules();
    const timeout = vi.spyOn(globalThis, "setTimeout");
    const interval = vi.spyOn(globalThis, "setInterval");
    const core = await import("../../packages/core/src/index.ts");
    const limiter = core.createRateLimiter({
      policy: core.fixedWindow({ limit: 1, window: "1s" }),
      store: core.memoryStore({ maxKeys: 10 }),
    });
    await limiter.limit("k");
    expect(timeout).not.toHaveBeenCalled();
    expect(interval).not.toHaveBeenCalled();
    timeout.mockRestore();
    interval.mockRestore();
  });
});
