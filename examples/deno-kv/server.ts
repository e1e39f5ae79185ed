// Deno.serve with withRateLimit and the Deno KV store: every process (or Deno Deploy isolate)
// sharing the database shares the limits. Imported as a Deno app imports npm packages.
//   deno run --unstable-kv --allow-net --allow-env --allow-read --allow-write examples/deno-kv/server.ts
// (KV_PATH names a local database file; on Deno Deploy, Deno.openKv() needs no path.)
// deno-lint-ignore-file no-import-prefix -- the imports an app without an import map writes
import { slidingWindow, withRateLimit } from "npm:@floodgate/core@^0.1.0";
import { denoKvStore, type KvDatabase } from "npm:@floodgate/deno-kv@^0.1.0";

declare const Deno: {
  env: { get(name: string): string | undefined };
  openKv(path?: string): Promise<KvDatabase>;
  serve(
    options: { port: number; hostname: string; onListen?: (addr: { port: number }) => void },
    handler: (request: Request, info: { remoteAddr: { hostname: string } }) => Response | Promise<Response>,
  ): unknown;
};

const kv = await Deno.openKv(Deno.env.get("KV_PATH"));
const handler = withRateLimit(
  (request: Request) => Response.json({ hello: "deno kv", path: new URL(request.url).pathname }),
  { policy: slidingWindow({ limit: 5, window: "1m" }), store: denoKvStore({ kv }) },
);

Deno.serve(
  {
    port: Number(Deno.env.get("PORT") ?? 8000),
    hostname: "127.0.0.1",
    onListen: ({ port }) => console.log(`deno kv example listening on http://127.0.0.1:${port}`),
  },
  handler,
);
