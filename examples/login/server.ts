// The login example on Hono and Node:
//   npx tsx examples/login/server.ts
//   curl -s -X POST -H 'content-type: application/json' -d '{"user":"alice","password":"guess"}' http://127.0.0.1:3005/login
import { serve } from "@hono/node-server";
import { getConnInfo } from "@hono/node-server/conninfo";
import { memoryStore } from "@floodgate/core";
import { honoApp } from "./apps.ts";

// With Redis: redisStore({ client: new Redis(process.env.REDIS_URL) }), and blocks survive restarts.
const app = honoApp(memoryStore(), { getConnInfo } as never);
const port = Number(process.env.PORT ?? 3005);
serve({ fetch: app.fetch, port, hostname: "127.0.0.1" }, (info) => {
  console.log(`Login example listening on http://127.0.0.1:${info.port}`);
});
