/**
 * The snippets of docs/compound-limits.md, as written there (the test checks that the guide still
 * holds these lines), so the guide's code keeps working and says what it does.
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { expect, it } from "vitest";
import { createCompoundLimiter, createRateLimiter, fixedWindow, memoryStore, slidingWindow, tokenBucket } from "@floodgate/core";

const GUIDE = readFileSync(fileURLToPath(new URL("../../docs/compound-limits.md", import.meta.url)), "utf8");

const SETUP = `const store = memoryStore(); // or redisStore({ client }), upstashStore({ redis }), ...
const quotas = createCompoundLimiter({
  dimensions: {
    user: createRateLimiter({ policy: slidingWindow({ limit: 100, window: "1m" }), store, prefix: "user:" }),
    org: createRateLimiter({ policy: fixedWindow({ limit: 10_000, window: "1d" }), store, prefix: "org:" }),
    ip: createRateLimiter({ policy: tokenBucket({ capacity: 20, refillRate: 20 }), store, prefix: "ip:" }),
    global: createRateLimiter({ policy: fixedWindow({ limit: 5_000, window: "1s" }), store, prefix: "global:" }),
  },
});`;

const makeQuotas = () => {
  const store = memoryStore(); // or redisStore({ client }), upstashStore({ redis }), ...
  const quotas = createCompoundLimiter({
    dimensions: {
      user: createRateLimiter({ policy: slidingWindow({ limit: 100, window: "1m" }), store, prefix: "user:" }),
      org: createRateLimiter({ policy: fixedWindow({ limit: 10_000, window: "1d" }), store, prefix: "org:" }),
      ip: createRateLimiter({ policy: tokenBucket({ capacity: 20, refillRate: 20 }), store, prefix: "ip:" }),
      global: createRateLimiter({ policy: fixedWindow({ limit: 5_000, window: "1s" }), store, prefix: "global:" }),
    },
  });
  return quotas;
};

it("the guide's setup is the one tested here", () => {
  expect(GUIDE).toContain(SETUP);
  expect(GUIDE).toContain(`if (decision.charge) await quotas.refund(decision.charge);`);
  expect(GUIDE).toContain(`await reservation.settle(used); // every dimension, into what it was charged in`);
});

it("the IP's 20 per second binds first, naming the dimension; a refund gives back everywhere", async () => {
  const quotas = makeQuotas();
  const keys = { user: "u_42", org: "acme", ip: "203.0.113.7", global: "all" };
  // The bucket refills 20 a second: a few more may fit while the loop runs.
  let admitted = 0;
  let decision = await quotas.limit(keys);
  while (decision.allowed && admitted < 100) {
    admitted++;
    decision = await quotas.limit(keys);
  }
  expect(admitted).toBeGreaterThanOrEqual(20);
  expect(decision.allowed).toBe(false);
  expect(decision.dimension).toBe("ip");
  expect(decision.dimensions.org.remaining).toBe(10_000 - admitted); // the refusal charged nothing
  expect(decision.dimensions.ip.retryAfterMs).toBeGreaterThan(0);
  // Another IP of the same user: the user's minute goes on.
  const other = await quotas.limit({ ...keys, ip: "198.51.100.1" });
  expect(other.allowed).toBe(true);
  expect(other.dimensions.user.remaining).toBe(100 - admitted - 1);
  if (other.charge) await quotas.refund(other.charge);
  expect((await quotas.peek(keys)).dimensions.user.remaining).toBe(100 - admitted);
});

it("a reservation settles every dimension at the cost the work turned out to have", async () => {
  const quotas = makeQuotas();
  const keys = { user: "u_42", org: "acme", ip: "203.0.113.7", global: "all" };
  const reservation = await quotas.reserve(keys, { estimate: 5 });
  expect(reservation.decision.allowed).toBe(true);
  const used = 3;
  await reservation.settle(used); // every dimension, into what it was charged in
  const after = await quotas.peek(keys);
  expect(after.dimensions.org.remaining).toBe(9_997);
  expect(after.dimensions.ip.remaining).toBe(17);
});
