// A plain fetch handler, as Deno.serve, Bun.serve, Cloudflare Workers and Vercel take it.
//   deno run -A examples/fetch/server.ts   |   bun examples/fetch/server.ts   |   npx tsx examples/fetch/server.ts
import { slidingWindow, withRateLimit } from "@floodgate/core";

// The client address: by default, Deno's `info.remoteAddr` or Bun's `server.requestIP()`; on
// Workers set `trustProxy: "cloudflare"` (CF-Connecting-IP); elsewhere pass `getClientIp`.
const handler = withRateLimit(
  (request: Request, _info?: unknown) => Response.json({ hello: "world", path: new URL(request.url).pathname }),
  { policy: slidingWindow({ limit: 5, window: "1m" }) },
);

const port = Number(globalThis.process?.env?.PORT ?? 3003);
const announce = (actual: number) => {
  console.log(`fetch example listening on http://127.0.0.1:${actual}`);
  console.log(`Try: for i in $(seq 1 6); do curl -s -o /dev/null -w "%{http_code}\\n" http://127.0.0.1:${actual}/; done`);
};
const runtime = globalThis as { Deno?: any; Bun?: any };
if (runtime.Deno) {
  runtime.Deno.serve({ port, hostname: "127.0.0.1", onListen: ({ port: p }: { port: number }) => announce(p) }, handler);
} else if (runtime.Bun) {
  const server = runtime.Bun.serve({ port, hostname: "127.0.0.1", fetch: handler });
  announce(server.port);
} else {
  const { serve } = await import("@hono/node-server");
  // On Node, hand the socket address over the way Deno does.
  type NodeEnv = { incoming: { socket: { remoteAddress?: string } } };
  serve({
    fetch: (request: Request, env: NodeEnv) => handler(request, { remoteAddr: { hostname: env.incoming.socket.remoteAddress } }),
    port,
    hostname: "127.0.0.1",
  }, (info) => announce(info.port));
}

// Not `export default { fetch: handler }` (what a Worker exports): Bun would serve that too, a
// second server on port 3000 or $PORT, and Deno warns about it.
export { handler };
