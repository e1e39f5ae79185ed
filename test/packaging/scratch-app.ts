/**
 * The files of the scratch app that `tarballs.test.ts` installs from the packed tarballs: each
 * script serves a rate-limited route on 127.0.0.1 (port 0), requests it three times with a limit
 * of 2, and prints what it saw as JSON on stdout.
 */

/** Three GETs to the server's route; the statuses, headers and bodies, as JSON lines. */
const PROBE = `
async function probe(port, path) {
  const seen = [];
  for (let i = 0; i < 3; i++) {
    const response = await fetch("http://127.0.0.1:" + port + path);
    seen.push({ status: response.status, headers: Object.fromEntries(response.headers), body: await response.text() });
  }
  return seen;
}
`;

export function scratchFiles(options: { coreHttpEntry: boolean }): Record<string, string> {
  const files: Record<string, string> = {
    "express.mjs": `import express from "express";
import { slidingWindow } from "@floodgate/core";
import { rateLimit } from "@floodgate/express";
${PROBE}
const app = express();
app.use(rateLimit({ policy: slidingWindow({ limit: 2, window: "1m" }) }));
app.get("/hello", (req, res) => { res.json({ remaining: req.rateLimit.remaining }); });
const server = app.listen(0, "127.0.0.1", async () => {
  console.log(JSON.stringify(await probe(server.address().port, "/hello")));
  server.close();
});
`,
    "hono.mjs": `import { serve } from "@hono/node-server";
import { Hono } from "hono";
import { tokenBucket } from "@floodgate/core";
import { rateLimit } from "@floodgate/hono";
${PROBE}
const app = new Hono();
app.use(rateLimit({ policy: tokenBucket({ capacity: 2, refillRate: 0.001 }) }));
app.get("/hello", (c) => c.json({ remaining: c.get("rateLimit").remaining }));
const server = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, async (info) => {
  console.log(JSON.stringify(await probe(info.port, "/hello")));
  server.close();
});
`,
    "koa.mjs": `import Koa from "koa";
import { fixedWindow } from "@floodgate/core";
import { rateLimit } from "@floodgate/koa";
${PROBE}
const app = new Koa();
app.use(rateLimit({ policy: fixedWindow({ limit: 2, window: "1h" }) }));
app.use((ctx) => { ctx.body = { remaining: ctx.state.rateLimit.remaining }; });
const server = app.listen(0, "127.0.0.1", async () => {
  console.log(JSON.stringify(await probe(server.address().port, "/hello")));
  server.close();
});
`,
    "fetch.mjs": `import { serve } from "@hono/node-server";
import { slidingLog, withRateLimit } from "@floodgate/core";
${PROBE}
const handler = withRateLimit(
  (request) => Response.json({ path: new URL(request.url).pathname }),
  { policy: slidingLog({ limit: 2, window: "1m" }), getClientIp: (_request, env) => env.incoming.socket.remoteAddress },
);
const server = serve({ fetch: handler, port: 0, hostname: "127.0.0.1" }, async (info) => {
  console.log(JSON.stringify(await probe(info.port, "/hello")));
  server.close();
});
`,
    "core.cjs": `"use strict";
const { createRateLimiter, memoryStore, slidingWindow, withRateLimit, FloodgateError } = require("@floodgate/core");
const { serve } = require("@hono/node-server");
${PROBE}
const limiter = createRateLimiter({ policy: slidingWindow({ limit: 1, window: "1m" }), store: memoryStore() });
let invalid;
try { slidingWindow({ limit: -1, window: "1m" }); } catch (error) { invalid = { isFloodgateError: error instanceof FloodgateError, code: error.code }; }
const handler = withRateLimit(() => new Response("hi"), {
  policy: slidingWindow({ limit: 2, window: "1m" }),
  getClientIp: (_request, env) => env.incoming.socket.remoteAddress,
});
const server = serve({ fetch: handler, port: 0, hostname: "127.0.0.1" }, async (info) => {
  const decisions = [(await limiter.limit("k")).allowed, (await limiter.limit("k")).allowed];
  console.log(JSON.stringify({ decisions, invalid, http: await probe(info.port, "/") }));
  server.close();
});
`,
    "upstash.mjs": `import { Redis } from "@upstash/redis";
import { createRateLimiter, slidingWindow, upstashStore } from "@floodgate/core";
// The URL and token come from the environment upstash-local printed.
const redis = Redis.fromEnv({ enableTelemetry: false, retry: { retries: 0 } });
const limiter = createRateLimiter({ policy: slidingWindow({ limit: 2, window: "1m" }), store: upstashStore({ redis }) });
const decisions = [];
for (let i = 0; i < 3; i++) decisions.push((await limiter.limit("scratch-user")).allowed);
console.log(JSON.stringify({ decisions, ping: await redis.ping() }));
`,
    "upstash-local.cjs": `"use strict";
const { startUpstashBridge, parseRedisUrl } = require("@floodgate/upstash-local");
console.log(JSON.stringify({ startUpstashBridge: typeof startUpstashBridge, endpoint: parseRedisUrl("redis://127.0.0.1:6380/1") }));
`,
    "tsconfig.json": JSON.stringify(
      {
        compilerOptions: {
          module: "node16",
          moduleResolution: "node16",
          target: "es2022",
          lib: ["es2022"],
          types: ["node"],
          strict: true,
          noEmit: true,
          // As most apps do: @types/koa and its transitive @types disagree at some versions, and
          // declaration resolution itself is attw's job; the @ts-expect-error lines below prove
          // the Floodgate types are real, not any.
          skipLibCheck: true,
        },
        files: ["consumer.ts", "consumer.cts"],
      },
      null,
      2,
    ),
    "consumer.ts":
      `import { createRateLimiter, memoryStore, slidingWindow, withRateLimit, type FetchHandler, type RateLimitStore } from "@floodgate/core";
import { rateLimit as expressRateLimit, type RateLimitedRequest } from "@floodgate/express";
import { rateLimit as honoRateLimit } from "@floodgate/hono";
import { rateLimit as koaRateLimit } from "@floodgate/koa";
import { parseRedisUrl, startUpstashBridge, type UpstashBridge } from "@floodgate/upstash-local";
import express from "express";
import { Hono } from "hono";
import Koa from "koa";

const store: RateLimitStore = memoryStore();
const limiter = createRateLimiter({ policy: slidingWindow({ limit: 2, window: "1m" }), store });
export const remaining: Promise<number> = limiter.limit("k").then((decision) => decision.remaining);
// @ts-expect-error: a limit is a number (a consumer whose types resolved to any would not fail here)
slidingWindow({ limit: "2", window: "1m" });

const app = express();
app.use(expressRateLimit({ policy: slidingWindow({ limit: 2, window: "1m" }) }));
app.get("/", (req, res) => { res.json({ remaining: (req as RateLimitedRequest).rateLimit?.remaining }); });
new Hono().use(honoRateLimit({ policy: slidingWindow({ limit: 2, window: "1m" }) }));
new Koa().use(koaRateLimit({ policy: slidingWindow({ limit: 2, window: "1m" }) }));
export const handler: FetchHandler<[]> = withRateLimit(async (request: Request) => new Response(request.url), {
  policy: slidingWindow({ limit: 2, window: "1m" }),
  getClientIp: () => "203.0.113.7",
});
export const bridge: Promise<UpstashBridge> = startUpstashBridge({ redis: parseRedisUrl("redis://127.0.0.1:6379") });
// @ts-expect-error: the bridge needs a Redis endpoint
startUpstashBridge({});
`,
    "consumer.cts": `import { createRateLimiter, memoryStore, tokenBucket } from "@floodgate/core";
import { startUpstashBridge } from "@floodgate/upstash-local";

export const limiter = createRateLimiter({ policy: tokenBucket({ capacity: 2, refillRate: 1 }), store: memoryStore() });
export const start: typeof startUpstashBridge = startUpstashBridge;
// @ts-expect-error: capacity is a number
tokenBucket({ capacity: "2", refillRate: 1 });
`,
  };
  if (options.coreHttpEntry) {
    files["core-http.mjs"] = `import * as http from "@floodgate/core/http";
console.log(JSON.stringify(Object.fromEntries(Object.entries(http).map(([name, value]) => [name, typeof value]))));
`;
    files["core-http.cjs"] = `"use strict";
const http = require("@floodgate/core/http");
console.log(JSON.stringify(Object.fromEntries(Object.entries(http).map(([name, value]) => [name, typeof value]))));
`;
    files["consumer.ts"] += `import * as coreHttp from "@floodgate/core/http";
export const httpEntryNames: string[] = Object.keys(coreHttp);
`;
  }
  return files;
}
