// Worker (c): costs settled after a streamed response, over upstashStore, through Hono
// (`/hono/*`) and the fetch wrapper (`/fetch/*`). The Worker's ExecutionContext is passed on as it
// is; `/__handed` tells how many promises reached its `waitUntil` (counted on the way, then handed
// to workerd's own). The bridge's URL and token are inlined at bundle time (esbuild `define`).
import { Hono } from "hono";
import { Redis } from "@upstash/redis/cloudflare";
import { rateLimit, type RateLimitEnv } from "@floodgate/hono";
import { fixedWindow, getRateLimit, type RateLimitInfo, upstashStore, withRateLimit } from "@floodgate/core";

declare const __BRIDGE_URL__: string;
declare const __BRIDGE_TOKEN__: string;

interface Ctx {
  waitUntil(promise: Promise<unknown>): void;
  passThroughOnException(): void;
}

const store = upstashStore({ redis: new Redis({ url: __BRIDGE_URL__, token: __BRIDGE_TOKEN__, enableTelemetry: false }) });
const policy = fixedWindow({ limit: 1000, window: "1h", name: "tokens" });
const options = { policy, store, key: () => "worker-key", cost: { estimate: 100 }, trustProxy: "cloudflare" as const };

/** Three chunks, reporting 1, 2, 3 units as they are produced. */
function streamed(info: RateLimitInfo | undefined): Response {
  let i = 0;
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (i === 3) return controller.close();
      info?.report(++i);
      controller.enqueue(new TextEncoder().encode(`chunk ${i}\n`));
    },
  });
  return new Response(body, { headers: { "content-type": "text/plain" } });
}

const app = new Hono<RateLimitEnv>();
app.use("/hono/*", rateLimit({ ...options, prefix: "wk:hono:" }));
app.get("/hono/stream", (c) => streamed(c.get("rateLimit")));
const fetchHandler = withRateLimit<[unknown, Ctx]>((request) => streamed(getRateLimit(request)), { ...options, prefix: "wk:fetch:" });

let handed = 0;
export default {
  fetch(request: Request, env: unknown, ctx: Ctx): Response | Promise<Response> {
    const counting: Ctx = {
      waitUntil: (promise) => {
        handed++;
        ctx.waitUntil(promise);
      },
      passThroughOnException: () => ctx.passThroughOnException(),
    };
    const path = new URL(request.url).pathname;
    if (path === "/__handed") return Response.json({ handed });
    if (path.startsWith("/fetch/")) return fetchHandler(request, env, counting);
    return app.fetch(request, env, counting as never);
  },
};
