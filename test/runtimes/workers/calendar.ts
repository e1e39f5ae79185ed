// Worker (c): calendar windows decided in workerd, with workerd's `Intl`: `/calendar/memory` over a
// memory store of the isolate, `/calendar/durable-object` over durableObjectStore, whose object
// decides on the caller's clock (the instant each request names). See ../calendar-route.ts.
import { memoryStore } from "@floodgate/core";
import { durableObjectStore, type RateLimiterNamespace, RateLimiterObject } from "@floodgate/cloudflare";
import { calendarRoute } from "../calendar-route.ts";

export { RateLimiterObject };

const memory = calendarRoute(memoryStore(), "calendar:");
let durable: ((request: Request) => Promise<Response>) | undefined;

export default {
  fetch(request: Request, env: { RATE_LIMITER: RateLimiterNamespace }): Promise<Response> | Response {
    const path = new URL(request.url).pathname;
    if (path === "/calendar/memory") return memory(request);
    if (path === "/calendar/durable-object") {
      durable ??= calendarRoute(durableObjectStore({ namespace: env.RATE_LIMITER, clock: "caller" }), "calendar:");
      return durable(request);
    }
    return new Response("not found", { status: 404 });
  },
};
