import { getConnInfo } from "@hono/node-server/conninfo";
import type { Hono } from "hono";
import { rateLimiter } from "hono-rate-limiter";

/** 5 requests per minute and client address on /api/*. */
export function limitApi(app: Hono): void {
  app.use(
    "/api/*",
    rateLimiter({
      windowMs: 60_000,
      limit: 5,
      standardHeaders: "draft-7",
      keyGenerator: (c) => getConnInfo(c).remote.address ?? "unknown",
      message: { error: "Too many requests, slow down." },
    }),
  );
}
