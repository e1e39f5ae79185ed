// How redisStore sends its scripts through node-redis: a plain client's EVALSHA goes out with
// `sendCommand` (fewer layers per decision), a client with a `keyPrefix` keeps `evalSha`, which
// applies the prefix to the keys; decisions, the NOSCRIPT fallback and the keys are the same.
import { Redis as IORedis } from "ioredis";
import { createClient } from "redis";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createRateLimiter, fixedWindow, redisStore, slidingWindow, tokenBucket } from "../../packages/core/src/index.ts";
import { type RedisInstance, startRedis } from "../support/redis-server.ts";

let server: RedisInstance;
let admin: IORedis;
beforeAll(async () => {
  server = await startRedis();
  admin = new IORedis(server.port, server.host);
});
afterAll(async () => {
  admin.disconnect();
  await server.stop();
});

const POLICIES = {
  "fixed window": () => fixedWindow({ limit: 3, window: "1h" }),
  "token bucket": () => tokenBucket({ capacity: 3, refillRate: 3 / 3600 }),
  "sliding window": () => slidingWindow({ limit: 3, window: "1h" }),
};

describe("redisStore over node-redis", () => {
  for (const [kind, policy] of Object.entries(POLICIES)) {
    it(`${kind}: a plain client's decisions are sent with sendCommand, not evalSha; limits, keys and NOSCRIPT as ever`, async () => {
      const client = createClient({ socket: { host: server.host, port: server.port } });
      await client.connect();
      try {
        const evalSha = vi.spyOn(client, "evalSha");
        const sendCommand = vi.spyOn(client, "sendCommand");
        const limiter = createRateLimiter({ policy: policy(), store: redisStore({ client, denyCache: false }), prefix: `nr-${kind[0]}:` });
        const allowed: boolean[] = [];
        for (let i = 0; i < 4; i++) allowed.push((await limiter.limit("u")).allowed);
        // The server loses its scripts: the next decision loads it again with EVAL.
        await admin.script("FLUSH");
        allowed.push((await limiter.limit("v")).allowed);
        expect(allowed).toEqual([true, true, true, false, true]);
        expect(evalSha).not.toHaveBeenCalled();
        expect(sendCommand.mock.calls.filter(([args]) => (args as string[])[0] === "EVALSHA").length).toBeGreaterThanOrEqual(4);
        expect(await admin.exists(`nr-${kind[0]}:{u}`)).toBe(1);
      } finally {
        client.destroy();
      }
    });
  }

  it("a client with a keyPrefix: evalSha, and the store's keys carry the client's prefix", async () => {
    const client = createClient({ socket: { host: server.host, port: server.port }, keyPrefix: "app:" });
    await client.connect();
    try {
      const evalSha = vi.spyOn(client, "evalSha");
      const limiter = createRateLimiter({ policy: fixedWindow({ limit: 2, window: "1h" }), store: redisStore({ client }), prefix: "kp:" });
      const allowed: boolean[] = [];
      for (let i = 0; i < 3; i++) allowed.push((await limiter.limit("u")).allowed);
      expect(allowed).toEqual([true, true, false]);
      expect(evalSha).toHaveBeenCalled();
      expect(await admin.exists("app:kp:{u}")).toBe(1);
      expect(await admin.exists("kp:{u}")).toBe(0);
    } finally {
      client.destroy();
    }
  });
});
