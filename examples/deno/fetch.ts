// Deno.serve with the fetch wrapper.   deno run --allow-net --allow-env=PORT examples/deno/fetch.ts
import { slidingWindow, withRateLimit } from "@floodgate/core";

declare const Deno: {
  env: { get(name: string): string | undefined };
  serve(
    options: { port: number; hostname: string; onListen?: (addr: { port: number }) => void },
    handler: (request: Request, info: { remoteAddr: { hostname: string } }) => Response | Promise<Response>,
  ): unknown;
};

// The client address comes from Deno's `info.remoteAddr` (the wrapper reads it by default).
const handler = withRateLimit(
  (request: Request) => Response.json({ hello: "deno", path: new URL(request.url).pathname }),
  { policy: slidingWindow({ limit: 5, window: "1m" }) },
);

Deno.serve(
  {
    port: Number(Deno.env.get("PORT") ?? 8000),
    hostname: "127.0.0.1",
    onListen: ({ port }) => console.log(`deno fetch example listening on http://127.0.0.1:${port}`),
  },
  handler,
);
