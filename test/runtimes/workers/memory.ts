// Worker (b): the fetch wrapper over a memory store created at global scope (state lives as long
// as the isolate). With __MISBEHAVE__ it starts a timer at global scope, as a negative control.
import { globalScope } from "./global-scope-guard.ts";
import { memoryStore, tokenBucket, withRateLimit } from "@floodgate/core";

declare const __MISBEHAVE__: boolean;

const store = memoryStore();
const handler = withRateLimit(
  (request: Request) => Response.json({ hello: "workerd", path: new URL(request.url).pathname }),
  { policy: tokenBucket({ capacity: 2, refillRate: 2 / 3600, name: "global" }), store, trustProxy: "cloudflare" },
);
if (__MISBEHAVE__) setTimeout(() => undefined, 1000);

globalScope.done();
export default {
  fetch(request: Request): Promise<Response> | Response {
    if (new URL(request.url).pathname === "/__global-scope") return Response.json({ calls: globalScope.calls });
    return handler(request);
  },
};
