// A rule over several keys whose user dimension bounds requests in flight, through every
// integration over a real socket, on the memory store and on Redis (a real redis-server this
// file starts): clients that hang up get every dimension's units back, when the response ends and
// when they leave while the store decides, and never more handlers of a user run at once than
// its limit.
import {
  concurrency,
  createRateLimiter,
  dimensions,
  fixedWindow,
  memoryStore,
  type Policy,
  type RateLimitStore,
  redisStore,
} from "@floodgate/core";
import { Redis as IORedis } from "ioredis";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../support/eventually.ts";
import { type RedisInstance, startRedis } from "../support/redis-server.ts";
import { type App, keyOf, Running, sleep, TARGETS } from "./disconnect-targets.ts";

let redis: RedisInstance | undefined;
const STORES = [
  { name: "memory", open: async () => ({ store: memoryStore() as RateLimitStore, close: async () => {} }) },
  {
    name: "redis",
    async open() {
      redis ??= await startRedis();
      const client = new IORedis(redis.port, redis.host);
      return { store: redisStore({ client }) as RateLimitStore, close: async () => void client.disconnect() };
    },
  },
];
afterAll(async () => {
  await redis?.stop();
});

let prefixes = 0;
const inFlight = [concurrency({ limit: 1, timeout: "5m", name: "in-flight" })];
const daily = [fixedWindow({ limit: 1000, window: "1d", name: "requests" })];

describe.each(STORES)("on $name", (fixture) => {
  let store: RateLimitStore;
  let closeStore: () => Promise<void>;
  beforeAll(async () => {
    ({ store, close: closeStore } = await fixture.open());
  });
  afterAll(async () => {
    await closeStore?.();
  });

  describe.each(TARGETS)("$name", (target) => {
    let app: App | undefined;
    afterEach(async () => {
      await app?.close();
      app = undefined;
    });

    /** Units held per dimension, read through limiters of their own on the dimensions' namespaces. */
    const used = async (prefix: string, user: string): Promise<{ user: number; org: number }> => {
      const read = async (policy: Policy[], dimension: string, key: string) => {
        const d = await createRateLimiter({ policy, store, prefix: `${prefix}${dimension}:`, resilience: false }).peek(key);
        return d.limit - d.remaining;
      };
      return { user: await read(inFlight, "user", user), org: await read(daily, "org", "acme") };
    };
    const rule = (slowKey = false) =>
      dimensions({
        user: {
          policy: inFlight,
          key: slowKey ? (req) => sleep(150).then(() => keyOf(req.raw)) : (req) => keyOf(req.raw),
        },
        org: { key: () => "acme", policy: daily },
      });

    it("limit 1, 20 clients each hanging up 60 ms after sending: one handler at a time, every unit back", async () => {
      const prefix = `dims-drop${++prefixes}:`;
      const running = new Running();
      app = await target.start({ rules: { default: { dimensions: rule() } }, store, prefix, warnings: false }, running);
      await app.send("/x?key=warm-up");
      await Promise.all(Array.from({ length: 20 }, (_, i) => sleep(i * 20).then(() => app!.send("/x?key=a&ms=300", 60))));
      await running.idle();
      await app.handle.flush();
      expect(running.runs).toBeGreaterThan(1);
      expect(running.mostAtOnce()).toBe(1);
      const held = await used(prefix, "a");
      // Every admitted request stays charged to the organisation's day; none holds a user's unit.
      expect(held.user).toBe(0);
      expect(held.org).toBe(running.runs);
    });

    it("a client that hangs up while the store decides: settled at once, its handler not run, nothing stranded", async () => {
      const prefix = `dims-gone${++prefixes}:`;
      const running = new Running();
      app = await target.start({ rules: { default: { dimensions: rule(true) } }, store, prefix, warnings: false }, running);
      await Promise.all(Array.from({ length: 3 }, () => app!.send("/x?key=a&ms=10", 50)));
      await sleep(200);
      await running.idle();
      await app.handle.flush();
      const held = await eventually(() => used(prefix, "a"), (u) => u.user === 0);
      expect(held.user).toBe(0);
      if (target.name !== "withRateLimit") expect(running.runs).toBe(0);
      // And the user's one unit still admits a request.
      const before = running.runs;
      await app.send("/x?key=a&ms=10");
      expect(running.runs - before).toBe(1);
      await app.handle.flush();
      expect((await used(prefix, "a")).user).toBe(0);
    });
  });
});
