// Koa: one limit for the whole app, keyed by a verified user id when there is one.
//   npx tsx examples/koa/server.ts
import { createServer } from "node:http";
import { fixedWindow } from "@floodgate/core";
import { rateLimit } from "@floodgate/koa";
import Koa from "koa";

const app = new Koa();
// An auth middleware would set ctx.state.user from a verified token; never key by a raw header.
app.use(
  rateLimit({
    policy: fixedWindow({ limit: 10, window: "1m" }),
    key: (req) => (req.raw.state.user ? `user:${req.raw.state.user.id}` : undefined), // undefined: the client IP
    format: "problem+json",
  }),
);
app.use((ctx) => {
  ctx.body = { hello: "world", remaining: ctx.state.rateLimit?.remaining };
});

const server = createServer(app.callback());
server.listen(Number(process.env.PORT ?? 3002), "127.0.0.1", () => {
  const address = server.address();
  const port = typeof address === "object" && address !== null ? address.port : 0;
  console.log(`Koa example listening on http://127.0.0.1:${port}`);
  console.log(`Try: for i in $(seq 1 11); do curl -s -o /dev/null -w "%{http_code}\\n" http://127.0.0.1:${port}/; done`);
});
