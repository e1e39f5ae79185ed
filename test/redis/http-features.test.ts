// The HTTP features that touch the store, on Redis over TCP (ioredis) and Upstash through the
// local bridge, on every integration: a denyList refusal counts nothing (no key is written), and
// a denial the deny cache answers says so (`source: "cache"`, no round trip).
import { fixedWindow, type RateLimitInfo } from "@floodgate/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TARGETS } from "../http/targets.ts";
import { createEnv } from "../http/support.ts";
import { ioredisHarness, type RedisHarness, upstashHarness } from "./harness.ts";

const HARNESSES: [string, () => Promise<RedisHarness>][] = [["ioredis", ioredisHarness], ["upstash (bridge)", upstashHarness]];

describe.each(HARNESSES)("%s", (_name, start) => {
  let harness: RedisHarness;
  beforeAll(async () => {
    harness = await start();
  }, 60_000);
  afterAll(() => harness.close());

  describe.each(TARGETS)("$name", (target) => {
    it("denyList: refused 403 before counting (no key written); then counted, denied, and the repeat denial answered by the deny cache", async () => {
      const admin = harness.admin as import("ioredis").Redis;
      await admin.flushall();
      const env = createEnv();
      const decisions: RateLimitInfo[] = [];
      const app = await target.start({
        policy: fixedWindow({ limit: 1, window: "1m" }),
        store: harness.store("server"),
        prefix: "features:",
        trustProxy: 1,
        denyList: ["203.0.113.0/24", "banned"],
        key: (req) => req.header("x-api-key"),
        logger: env.logger,
        onDecision: (info) => {
          decisions.push(info);
        },
      });
      try {
        const from = (ip: string, key?: string) => ({ headers: { "x-forwarded-for": ip, ...(key ? { "x-api-key": key } : {}) } });
        expect((await app.send("/api/x", from("203.0.113.5"))).status).toBe(403);
        expect((await app.send("/api/x", from("192.0.2.1", "banned"))).status).toBe(403);
        expect(await admin.keys("*")).toEqual([]); // nothing was counted
        expect((await app.send("/api/x", from("192.0.2.1"))).status).toBe(200);
        expect((await app.send("/api/x", from("192.0.2.1"))).status).toBe(429);
        expect((await app.send("/api/x", from("192.0.2.1"))).status).toBe(429);
        expect(decisions.map((d) => d.source)).toEqual(["denyList", "denyList", "store", "store", "cache"]);
        expect(decisions[4]!.decision?.source).toBe("cache");
        expect(decisions[4]).toMatchObject({ allowed: false, limit: 1, remaining: 0 });
      } finally {
        await app.close();
      }
    });
  });
});
