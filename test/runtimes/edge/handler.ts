// The Vercel edge runtime test's handler: `withRateLimit` over the memory store or the Upstash
// store (chosen and configured at bundle time with esbuild `define`), registered as the runtime
// expects from a single script: `addEventListener("fetch", ...)`.
import { Redis } from "@upstash/redis";
import {
  createRateLimiter,
  fixedWindow,
  getRateLimit,
  memoryStore,
  type RateLimitInfo,
  tokenBucket,
  upstashStore,
  withRateLimit,
} from "@floodgate/core";
import { calendarRoute } from "../calendar-route.ts";

declare const __STORE__: "memory" | "upstash";
declare const __BRIDGE_URL__: string;
declare const __BRIDGE_TOKEN__: string;

interface FetchEvent {
  request: Request;
  respondWith(response: Promise<Response> | Response): void;
  waitUntil(promise: Promise<unknown>): void;
}
declare function addEventListener(type: "fetch", listener: (event: FetchEvent) => void): void;

const store = __STORE__ === "upstash"
  ? upstashStore({ redis: new Redis({ url: __BRIDGE_URL__, token: __BRIDGE_TOKEN__, enableTelemetry: false }) })
  : memoryStore();

const handler = withRateLimit(
  (request: Request) => Response.json({ runtime: "edge", store: __STORE__, path: new URL(request.url).pathname }),
  { policy: tokenBucket({ capacity: 3, refillRate: 3 / 3600, name: "edge" }), store, trustProxy: "vercel" },
);

// `/settle/stream`: a cost settled after a streamed response (three chunks reporting 1, 2, 3 units),
// whose settlement reaches the event's waitUntil through what Vercel provides: the request
// context `@vercel/functions` reads its `waitUntil` from. `/settle/peek`: what is held, and how many promises were handed over.
const tokens = fixedWindow({ limit: 1000, window: "1h", name: "tokens" });
const settling = withRateLimit((request: Request) => streamed(getRateLimit(request)), {
  policy: tokens,
  store,
  prefix: "edge-settle:",
  key: () => "edge-key",
  cost: { estimate: 100 },
  trustProxy: "vercel",
});
const peeker = createRateLimiter({ policy: tokens, store, prefix: "edge-settle:" });
/** Promises handed to the event's waitUntil through the request context. */
let handed = 0;

function streamed(info: RateLimitInfo | undefined): Response {
  let i = 0;
  return new Response(
    new ReadableStream<Uint8Array>({
      pull(controller) {
        if (i === 3) return controller.close();
        info?.report(++i);
        controller.enqueue(new TextEncoder().encode(`chunk ${i}\n`));
      },
    }),
  );
}

// `/calendar`: calendar windows decided with the edge runtime's `Intl` (see ../calendar-route.ts).
const calendar = calendarRoute(store, "edge-calendar:");

addEventListener("fetch", (event) => {
  const path = new URL(event.request.url).pathname;
  if (path === "/calendar") return event.respondWith(calendar(event.request));
  if (path === "/settle/peek") {
    return event.respondWith(peeker.peek("edge-key").then((d) => Response.json({ remaining: d.remaining, handed })));
  }
  if (path === "/settle/stream") {
    (globalThis as Record<symbol, unknown>)[Symbol.for("@vercel/request-context")] = {
      get: () => ({
        waitUntil: (promise: Promise<unknown>) => {
          handed++;
          event.waitUntil(promise);
        },
      }),
    };
    return event.respondWith(settling(event.request));
  }
  event.respondWith(handler(event.request));
});
