// Clients that hang up, through every integration, on the memory store and on Redis (a real
// redis-server this file starts): a concurrency limit bounds the handlers running at once, a
// unit comes back when the later of the handler's end and the response's end has passed, and a
// request whose client left while the store decided is settled at once without running its handler.
import { concurrency, createRateLimiter, fixedWindow, memoryStore, type Policy, type RateLimitStore, redisStore } from "@floodgate/core";
import { Redis as IORedis } from "ioredis";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../support/eventually.ts";
import { type RedisInstance, startRedis } from "../support/redis-server.ts";
import { type App, keyOf, Running, sleep, TARGETS } from "./disconnect-targets.ts";

/** A store whose decisions take `ms` longer: a store far away, for a client to hang up while it decides. */
function slowStore(inner: RateLimitStore, ms: number): RateLimitStore {
  return new Proxy(inner, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver);
      if (typeof value !== "function") return value;
      if (property === "reserve" || property === "consume") {
        return (...args: unknown[]) => sleep(ms).then(() => value.apply(target, args));
      }
      return value.bind(target);
    },
  });
}

interface StoreFixture {
  name: string;
  open(): Promise<{ store: RateLimitStore; close(): Promise<void> }>;
}

let redis: RedisInstance | undefined;
const STORES: StoreFixture[] = [
  { name: "memory", open: async () => ({ store: memoryStore(), close: async () => {} }) },
  {
    name: "redis",
    async open() {
      redis ??= await startRedis();
      const client = new IORedis(redis.port, redis.host);
      return { store: redisStore({ client }), close: async () => void client.disconnect() };
    },
  },
];
afterAll(async () => {
  await redis?.stop();
});

let prefixes = 0;

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

    /** Units held per policy for `key`, read through a limiter of its own. */
    const used = async (policy: Policy[], prefix: string, key: string): Promise<Record<string, number>> => {
      const decision = await createRateLimiter({ policy, store, prefix, resilience: false }).peek(key);
      return Object.fromEntries(decision.policies.map((p) => [p.policy, p.limit - p.remaining]));
    };

    it("a client that hangs up while the store decides: settled at once, its handler not run, nothing stranded", async () => {
      const policy = [
        concurrency({ limit: 5, timeout: "5m", name: "in-flight" }),
        fixedWindow({ limit: 1000, window: "1h", name: "tokens" }),
      ];
      const prefix = `gone${++prefixes}:`;
      const running = new Running();
      // The decision takes 150 ms (a store far away; the key function too, as the memory store answers at once).
      const slowKey = async (req: { raw: unknown }) => {
        await sleep(150);
        return keyOf(req.raw);
      };
      app = await target.start(
        { policy, store: slowStore(store, 150), prefix, cost: { estimate: 10 }, key: slowKey, warnings: false },
        running,
      );
      // Five clients hang up while their decisions are under way: every unit would be stranded.
      await Promise.all(Array.from({ length: 5 }, () => app!.send("/x?key=a&ms=10", 50)));
      await sleep(200);
      await running.idle();
      await app.handle.flush();
      if (target.name === "withRateLimit") {
        // A fetch handler runs as the platform asks; its body, cancelled, gives everything back.
        expect((await used(policy, prefix, "a"))["in-flight"]).toBe(0);
      } else {
        // Settled as soon as each decision is in (a loaded machine may still be deciding now);
        // stranded, the units would stay for the policy's 5 minutes.
        const held = await eventually(() => used(policy, prefix, "a"), (u) => u["in-flight"] === 0 && u["tokens"] === 0);
        expect(running.runs).toBe(0);
        expect(held).toEqual({ "in-flight": 0, tokens: 0 });
      }
      const before = running.runs;
      // And the limit still admits five at once.
      await Promise.all(Array.from({ length: 5 }, () => app!.send("/x?key=b&ms=10")));
      expect(running.runs - before).toBe(5);
      await app.handle.flush();
      expect(await used(policy, prefix, "b")).toEqual({ "in-flight": 0, tokens: 50 });
    });

    it("limit 1, 20 clients each hanging up 60 ms after sending: one handler at a time, every unit back", async () => {
      const policy = [concurrency({ limit: 1, timeout: "5m", name: "in-flight" })];
      const prefix = `drop${++prefixes}:`;
      const running = new Running();
      app = await target.start({ policy, store, prefix, warnings: false }, running);
      await app.send("/x?key=warm-up"); // connections and scripts loaded: the first decisions take no longer than the rest
      // One every 20 ms, each hanging up 60 ms after it was sent, each handler running 300 ms.
      await Promise.all(Array.from({ length: 20 }, (_, i) => sleep(i * 20).then(() => app!.send("/x?key=a&ms=300", 60))));
      await running.idle();
      await app.handle.flush();
      expect(running.runs).toBeGreaterThan(1);
      expect(running.mostAtOnce()).toBe(1);
      expect(await used(policy, prefix, "a")).toEqual({ "in-flight": 0 });
    });

    it("200 clients on 5 keys, a third hanging up at random: never more than 5 handlers of a key at once, every unit back", async () => {
      const policy = [
        concurrency({ limit: 5, timeout: "5m", name: "in-flight" }),
        fixedWindow({ limit: 100_000, window: "1h", name: "requests" }),
      ];
      const prefix = `storm${++prefixes}:`;
      const running = new Running();
      app = await target.start({ policy, store, prefix, warnings: false }, running);
      let seed = 7;
      const random = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
      await Promise.all(Array.from({ length: 200 }, (_, i) => {
        const drop = random() < 1 / 3 ? Math.floor(random() * 60) : undefined;
        return sleep(Math.floor(random() * 100)).then(() => app!.send(`/x?key=k${i % 5}&ms=${20 + Math.floor(random() * 60)}`, drop));
      }));
      await running.idle();
      await app.handle.flush();
      expect(running.runs).toBeGreaterThan(20);
      expect(running.mostAtOnce()).toBeLessThanOrEqual(5);
      for (let k = 0; k < 5; k++) expect((await used(policy, prefix, `k${k}`))["in-flight"], `k${k}`).toBe(0);
    });
  });
});
