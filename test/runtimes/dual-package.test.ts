// Two copies of @floodgate/core in one program (its ESM and CJS builds, as when one dependency
// requires it and another imports it) must accept each other's policies: a policy carries its
// algorithm under a registered symbol, not one private to a copy.
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { requireBuilt } from "./support.ts";

type Core = typeof import("@floodgate/core");
type CoreHttp = typeof import("@floodgate/core/http");

describe("the ESM and CJS builds of core in one process", () => {
  it("accept each other's policies and decide the same", async () => {
    requireBuilt(["core"]);
    const dist = fileURLToPath(new URL("../../packages/core/dist/", import.meta.url));
    const esm = (await import(`${dist}index.js`)) as Core;
    const cjs = createRequire(import.meta.url)(`${dist}index.cjs`) as Core;
    expect(esm.createRateLimiter).not.toBe(cjs.createRateLimiter); // really two copies
    for (const [make, use] of [[cjs, esm], [esm, cjs]] as const) {
      let now = 1_700_000_000_000;
      const limiter = use.createRateLimiter({ policy: make.fixedWindow({ limit: 2, window: "1m" }), clock: () => now });
      const allowed = [];
      for (let i = 0; i < 3; i++) allowed.push((await limiter.limit("k")).allowed);
      expect(allowed).toEqual([true, true, false]);
      now += 60_000;
      expect((await limiter.limit("k")).allowed).toBe(true);
      expect(use.isPolicy(make.tokenBucket({ capacity: 1, refillRate: 1 }))).toBe(true);
    }
  });

  it("each build's two entries share one copy of core: an error from @floodgate/core/http is a FloodgateError of @floodgate/core", async () => {
    requireBuilt(["core"]);
    const dist = fileURLToPath(new URL("../../packages/core/dist/", import.meta.url));
    const require = createRequire(import.meta.url);
    const builds: [string, Core, CoreHttp][] = [
      ["ESM", (await import(`${dist}index.js`)) as Core, (await import(`${dist}http.js`)) as CoreHttp],
      ["CJS", require(`${dist}index.cjs`) as Core, require(`${dist}http.cjs`) as CoreHttp],
    ];
    const access = { method: () => "GET", path: () => "/", header: () => undefined };
    for (const [name, core, http] of builds) {
      let thrown: unknown;
      try {
        http.createHttpRateLimiter({ policy: core.fixedWindow({ limit: 1, window: "1m" }), statusCode: 200 }, access);
      } catch (error) {
        thrown = error;
      }
      expect(thrown, name).toBeInstanceOf(core.FloodgateError);
      // A limiter from the application entry works behind the adapter entry's HTTP limiter.
      const limiter = core.createRateLimiter({ policy: core.fixedWindow({ limit: 1, window: "1m" }) });
      const httpLimiter = http.createHttpRateLimiter({ limiter, warnings: false }, access);
      expect((await httpLimiter.decideRequest({}, "192.0.2.1"))?.allowed, name).toBe(true);
      expect((await httpLimiter.decideRequest({}, "192.0.2.1"))?.allowed, name).toBe(false);
    }
  });
});
