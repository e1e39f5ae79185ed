import { fixedWindow } from "@floodgate/core";
import { rateLimit } from "@floodgate/hono";
import { getConnInfo } from "@hono/node-server/conninfo";
import type { Hono } from "hono";

/** 5 requests per minute and client address on /api/*. */
export function limitApi(app: Hono): void {
  app.use(
    "/api/*",
    rateLimit({
      policy: fixedWindow({ limit: 5, window: "1m" }),
      getConnInfo, // the key defaults to the client address, IPv6 grouped by /64
      headers: "draft-7",
      message: { error: "Too many requests, slow down." },
    }),
  );
}
