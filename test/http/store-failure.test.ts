// The store-failure policy's edges, on the framework-neutral HTTP layer: the circuit breaker's
// half-open probe, odd rejection values, and hooks that fail.
import { fixedWindow, memoryStore, type RateLimitStore } from "@floodgate/core";
import { createHttpRateLimiter } from "@floodgate/core/http";
import { describe, expect, it } from "vitest";

const ACCESS = { method: () => "GET", path: () => "/x", header: () => undefined };
const perMinute = (limit: number) => fixedWindow({ limit, window: "1m" });

/** A memory store whose consume can be told to reject, or to hang until released. */
function controlledStore() {
  const inner = memoryStore();
  const hanging: Array<(error: unknown) => void> = [];
  const store = {
    name: "controlled",
    mode: "ok" as "ok" | "throw" | "hang",
    calls: 0,
    hanging,
    consume(...args: Parameters<RateLimitStore["consume"]>) {
      store.calls++;
      if (store.mode === "throw") return Promise.reject(new Error("down"));
      if (store.mode === "hang") {
        return new Promise<never>((_, reject) => {
          hanging.push(reject);
        });
      }
      return Promise.resolve(inner.consume(...args));
    },
    peek: (...args: Parameters<RateLimitStore["peek"]>) => inner.peek(...args),
    refund: (...args: Parameters<RateLimitStore["refund"]>) => inner.refund(...args),
    reset: (...args: Parameters<RateLimitStore["reset"]>) => inner.reset(...args),
  };
  return store;
}

describe("circuit breaker", () => {
  it("after the cool-down, one call probes the store; concurrent requests meanwhile do not call it", async () => {
    let now = 1_000_000;
    const store = controlledStore();
    store.mode = "throw";
    const http = createHttpRateLimiter(
      {
        store,
        policy: perMinute(5),
        onStoreError: "allow",
        circuitBreaker: { failures: 2, cooldownMs: 1000 },
        clock: () => now,
        warnings: false,
      },
      ACCESS,
    );
    await http.decideRequest({}, "192.0.2.1");
    await http.decideRequest({}, "192.0.2.1");
    await http.decideRequest({}, "192.0.2.1"); // open: not called
    expect(store.calls).toBe(2);

    now += 1000;
    store.mode = "hang";
    const probe = http.decideRequest({}, "192.0.2.1");
    const others = [http.decideRequest({}, "192.0.2.1"), http.decideRequest({}, "192.0.2.1")];
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(store.calls).toBe(3); // the probe only
    expect((await Promise.all(others)).map((r) => r?.info.source)).toEqual(["allow", "allow"]);

    // The probe fails: open again for a whole cool-down.
    store.hanging[0]!(new Error("still down"));
    expect((await probe)?.info.source).toBe("allow");
    now += 999;
    await http.decideRequest({}, "192.0.2.1");
    expect(store.calls).toBe(3);

    // The next probe succeeds: closed, every request calls the store again.
    now += 1;
    store.mode = "ok";
    expect((await http.decideRequest({}, "192.0.2.1"))?.info.source).toBe("store");
    expect((await http.decideRequest({}, "192.0.2.1"))?.info.source).toBe("store");
    expect(store.calls).toBe(5);
  });
});

/** Collects the unhandled rejections that happen while `run` (and a few timer turns after it) runs. */
async function unhandledDuring(run: () => Promise<void>): Promise<unknown[]> {
  const seen: unknown[] = [];
  const listener = (reason: unknown) => {
    seen.push(reason);
  };
  process.on("unhandledRejection", listener);
  try {
    await run();
    await new Promise((resolve) => setTimeout(resolve, 20));
  } finally {
    process.off("unhandledRejection", listener);
  }
  return seen;
}

describe("a store that rejects with a value that is not an Error", () => {
  // An object without a prototype cannot be turned into a string: String(value) throws.
  const odd = () => Object.create(null) as object;

  it.each([["a string", () => "down"], ["undefined", () => undefined], ["an object without a prototype", odd]])(
    "%s: the store-error policy decides, the request does not fail",
    async (_name, value) => {
      const store: RateLimitStore = {
        name: "odd",
        consume: () => Promise.reject(value()),
        peek: async () => [],
        refund: async () => {},
        reset: async () => {},
      };
      const errors: string[] = [];
      const http = createHttpRateLimiter({
        store,
        policy: perMinute(5),
        onStoreError: (error) => {
          errors.push(error.code);
          return "allow";
        },
        warnings: false,
      }, ACCESS);
      expect((await http.decideRequest({}, "192.0.2.1"))?.info.source).toBe("allow");
      expect(errors).toEqual(["STORE_ERROR"]);
    },
  );

  it("a refund the store rejects so is reported to onStoreError, never an unhandled rejection", async () => {
    const inner = memoryStore();
    const store: RateLimitStore = {
      name: "odd",
      consume: (...args) => Promise.resolve(inner.consume(...args)),
      peek: (...args) => inner.peek(...args),
      refund: () => Promise.reject(odd()),
      reset: async () => {},
    };
    const errors: string[] = [];
    const http = createHttpRateLimiter(
      {
        store,
        policy: perMinute(5),
        skipFailedRequests: true,
        onStoreError: (error) => {
          errors.push(error.code);
        },
        warnings: false,
      },
      ACCESS,
    );
    const unhandled = await unhandledDuring(async () => {
      (await http.decideRequest({}, "192.0.2.1"))!.settle(500);
    });
    expect(unhandled).toEqual([]);
    expect(errors).toEqual(["STORE_ERROR"]);
  });
});

describe("hooks that fail", () => {
  it("async hooks that reject are logged like hooks that throw, never an unhandled rejection", async () => {
    const logs: string[] = [];
    const rejecting = (name: string) => async () => {
      throw new Error(`${name} failed`);
    };
    const store: RateLimitStore = {
      name: "down",
      consume: () => Promise.reject(new Error("down")),
      peek: async () => [],
      refund: async () => {},
      reset: async () => {},
    };
    const http = createHttpRateLimiter(
      {
        store,
        policy: perMinute(1),
        // Fixed time: on real time a minute boundary between the two checks would admit both.
        clock: () => 1_700_000_040_000,
        // Typed as returning void/an action; an async function is what users will pass anyway.
        onStoreError: rejecting("onStoreError") as never,
        onDecision: rejecting("onDecision"),
        onLimited: rejecting("onLimited"),
        logger: {
          warn: (message) => {
            logs.push(message);
          },
        },
        warnings: false,
      },
      ACCESS,
    );
    const unhandled = await unhandledDuring(async () => {
      expect((await http.decideRequest({}, "192.0.2.1"))?.allowed).toBe(true); // fallback: 1 of 1
      expect((await http.decideRequest({}, "192.0.2.1"))?.allowed).toBe(false);
    });
    expect(unhandled).toEqual([]);
    expect(logs.filter((l) => l.includes("onStoreError failed"))).toHaveLength(2);
    expect(logs.filter((l) => l.includes("onDecision failed"))).toHaveLength(2);
    expect(logs.filter((l) => l.includes("onLimited failed"))).toHaveLength(1);
  });
});
