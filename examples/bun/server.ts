// Bun.serve with the fetch wrapper.   bun examples/bun/server.ts
import { slidingWindow, withRateLimit } from "@floodgate/core";

declare const Bun: {
  env: Record<string, string | undefined>;
  serve(options: {
    port: number;
    hostname: string;
    fetch: (request: Request, server: { requestIP(request: Request): { address: string } | null }) => Response | Promise<Response>;
  }): { port: number };
};

// The client address comes from Bun's `server.requestIP(request)` (the wrapper reads it by default).
const fetch = withRateLimit(
  (request: Request) => Response.json({ hello: "bun", path: new URL(request.url).pathname }),
  { policy: slidingWindow({ limit: 5, window: "1m" }) },
);

const server = Bun.serve({ port: Number(Bun.env["PORT"] ?? 3000), hostname: "127.0.0.1", fetch });
console.log(`bun example listening on http://127.0.0.1:${server.port}`);
