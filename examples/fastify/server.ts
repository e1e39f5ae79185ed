// Fastify, through the adapter in ./rate-limit.ts (written on @floodgate/core/http alone).
//   npx tsx examples/fastify/server.ts
import { slidingWindow, tokenBucket } from "@floodgate/core";
import Fastify from "fastify";
import { addRateLimit } from "./rate-limit.ts";

const app = Fastify();
addRateLimit(app, {
  rules: {
    "POST /api/login": slidingWindow({ limit: 5, window: "1m", name: "login" }),
    default: tokenBucket({ capacity: 100, refillRate: 20, name: "api" }),
  },
});
app.post("/api/login", async () => ({ token: "demo" }));
app.get("/api/hello", async (request) => ({ hello: "world", remaining: request.rateLimit?.remaining }));

const address = await app.listen({ port: Number(process.env.PORT ?? 3004), host: "127.0.0.1" });
console.log(`Fastify example listening on ${address}`);
console.log(`Try: for i in $(seq 1 6); do curl -s -o /dev/null -w "%{http_code}\\n" -X POST ${address}/api/login; done`);
