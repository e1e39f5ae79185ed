// The Vercel edge runtime test's handler: `withRateLimit` over the memory store or the Upstash
// store (chosen and configured at bundle time with esbuild `define`), registered as the runtime
// expects from a single script: `addEventListener("fetch", ...)`.
import { Redis } from "@upstash/redis";
import { memoryStore, tokenBucket, upstashStore, withRateLimit } from "@floodgate/core";

declare const __STORE__: "memory" | "upstash";
declare const __BRIDGE_URL__: string;
declare const __BRIDGE_TOKEN__: string;

interface FetchEvent {
  request: Request;
  respondWith(response: Promise<Response> | Response): void;
}
declare function addEventListener(type: "fetch", listener: (event: FetchEvent) => void): void;

const store = __STORE__ === "upstash"
  ? upstashStore({ redis: new Redis({ url: __BRIDGE_URL__, token: __BRIDGE_TOKEN__, enableTelemetry: false }) })
  : memoryStore();

const handler = withRateLimit(
  (request: Request) => Response.json({ runtime: "edge", store: __STORE__, path: new URL(request.url).pathname }),
  { policy: tokenBucket({ capacity: 3, refillRate: 3 / 3600, name: "edge" }), store, trustProxy: "vercel" },
);

addEventListener("fetch", (event) => event.respondWith(handler(event.request)));
