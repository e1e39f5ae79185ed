// The Netlify Edge Functions test's script, bundled from core's dist and run by Deno (the runtime
// Netlify's edge functions run on): an edge function as a user writes it (`export default async
// (request: Request, context: Context) => Response`, Netlify's published Context type), called
// the way Netlify calls it, with a context whose `waitUntil` records what it is handed. Prints
// one JSON line: what the client saw, what was handed to waitUntil, and what the store held
// before and after awaiting only that.
import type { Context } from "@netlify/types";
import { createRateLimiter, fixedWindow, getRateLimit, memoryStore, type RateLimitInfo, withRateLimit } from "@floodgate/core";

const store = memoryStore();
const tokens = fixedWindow({ limit: 1000, window: "1h", name: "tokens" });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Three chunks, reporting 1, 2, 3 units. */
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

// netlify/edge-functions/chat.ts: reserves 100 units, settles what was used once the body has
// been sent (read after a while, as an upstream's final usage would be).
const edgeFunction = withRateLimit((request: Request, _context: Context) => streamed(getRateLimit(request)), {
  policy: tokens,
  store,
  prefix: "edge:",
  key: () => "edge-key",
  getClientIp: (_request, context) => context.ip,
  cost: {
    estimate: 100,
    actual: async (_req, res) => {
      await sleep(150);
      return res.reported;
    },
  },
});

const handed: Promise<unknown>[] = [];
const request = new Request("https://floodgate-test.netlify.app/chat");
const context: Context = {
  account: { id: "team-1" },
  cookies: { delete: () => {}, get: () => "", set: () => {} },
  deploy: { context: "production", id: "deploy-1", published: true },
  geo: { city: "Paris", country: { code: "FR", name: "France" } },
  ip: "203.0.113.80",
  json: (input) => Response.json(input),
  log: (...data: unknown[]) => console.error(...data),
  next: () => Promise.reject(new Error("not used")),
  params: {},
  rewrite: () => Promise.reject(new Error("not used")),
  requestId: "01J0000000000000000000001",
  server: { region: "fra" },
  site: { id: "site-1", name: "floodgate-test", url: "https://floodgate-test.netlify.app" },
  url: new URL(request.url),
  waitUntil: (promise) => {
    handed.push(promise);
  },
};

const peeker = createRateLimiter({ policy: tokens, store, prefix: "edge:" });
const used = async () => 1000 - (await peeker.peek("edge-key")).remaining;

const response = await edgeFunction(request, context);
const body = await response.text();
const handedAtAnswer = handed.length;
const usedAtAnswer = await used();
await Promise.all(handed);
console.log(JSON.stringify({
  runtime: typeof (globalThis as { Deno?: unknown }).Deno === "object" ? "deno" : "other",
  status: response.status,
  ratelimit: response.headers.get("ratelimit"),
  body,
  handedAtAnswer,
  usedAtAnswer,
  usedAfter: await used(),
}));
