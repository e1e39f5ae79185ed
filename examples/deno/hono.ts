// Deno.serve with Hono.   deno run --allow-net --allow-env=PORT examples/deno/hono.ts
import { Hono } from "hono";
import { getConnInfo } from "hono/deno";
import { slidingWindow } from "@floodgate/core";
import { rateLimit, type RateLimitEnv } from "@floodgate/hono";

declare const Deno: {
  env: { get(name: string): string | undefined };
  serve(
    options: { port: number; hostname: string; onListen?: (addr: { port: number }) => void },
    handler: (request: Request, info: unknown) => Response | Promise<Response>,
  ): unknown;
};

const app = new Hono<RateLimitEnv>();
app.use("/api/*", rateLimit({ policy: slidingWindow({ limit: 5, window: "1m" }), getConnInfo }));
app.get("/api/hello", (c) => c.json({ hello: "deno + hono", remaining: c.get("rateLimit").remaining }));

Deno.serve(
  {
    port: Number(Deno.env.get("PORT") ?? 8000),
    hostname: "127.0.0.1",
    onListen: ({ port }) => console.log(`deno hono example listening on http://127.0.0.1:${port}`),
  },
  app.fetch,
);
