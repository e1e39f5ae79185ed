// Netlify: a function (`export default async (req: Request, context: Context) => Response`, the
// Functions API on Node; Edge Functions have the same signature and the same `Context`) gets
// Netlify's `Context` beside the request, whose `waitUntil` keeps the function alive for work
// after the response; `Netlify.context` is the same object, for code the context was not passed
// to. The contexts here are typed with Netlify's published `Context` and `NetlifyGlobal`
// (@netlify/types, which @netlify/functions and @netlify/edge-functions re-export): a rename of
// `waitUntil` or `context` on their side fails the type check of this file. Each test calls the
// function as Netlify does, reads the whole streamed body as the client would, then awaits only
// what was handed to `waitUntil`, and reads the store.
import { createRateLimiter, fixedWindow, getRateLimit, memoryStore, type RateLimitInfo, withRateLimit } from "@floodgate/core";
import { rateLimit, type RateLimitEnv } from "@floodgate/hono";
import type { Context, NetlifyGlobal } from "@netlify/types";
import { Hono } from "hono";
import { handle } from "hono/netlify";
import { afterEach, describe, expect, it } from "vitest";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const KEY = "netlify-key";
const tokens = fixedWindow({ limit: 1000, window: "1h", name: "tokens" });

/** The context Netlify passes a function, with a `waitUntil` that records what it was handed. */
function netlifyContext(request: Request, handed: Promise<unknown>[]): Context {
  return {
    account: { id: "team-1" },
    cookies: { delete: () => {}, get: () => "", set: () => {} },
    deploy: { context: "production", id: "deploy-1", published: true },
    geo: { city: "Paris", country: { code: "FR", name: "France" } },
    ip: "203.0.113.70",
    json: (input) => Response.json(input),
    log: (...data: unknown[]) => console.log(...data),
    next: () => Promise.reject(new Error("a function has no next()")),
    params: {},
    rewrite: () => Promise.reject(new Error("a function has no rewrite()")),
    requestId: "01J0000000000000000000000",
    server: { region: "us-east-2" },
    site: { id: "site-1", name: "floodgate-test", url: "https://floodgate-test.netlify.app" },
    url: new URL(request.url),
    waitUntil: (promise) => {
      handed.push(promise);
    },
  };
}

/**
 * A route streaming three chunks, reporting 1, 2, 3 units; the rule reserves 100 and settles what
 * `actual` reads once the body has been sent, which takes a while (as reading an upstream's final
 * usage would): the settlement is still under way when the client has the whole body.
 */
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

const options = (store: ReturnType<typeof memoryStore>) => ({
  policy: tokens,
  store,
  prefix: "netlify:",
  key: () => KEY,
  cost: {
    estimate: 100,
    actual: async (_req: unknown, res: { reported: number | undefined }) => {
      await sleep(150);
      return res.reported;
    },
  },
  trustProxy: "netlify" as const,
  // The origin is reachable only through Netlify here.
  warnings: { presetWithoutRanges: false },
});

/** Units held, read through another limiter over the store. */
const used = async (store: ReturnType<typeof memoryStore>) =>
  1000 - (await createRateLimiter({ policy: tokens, store, prefix: "netlify:" }).peek(KEY)).remaining;

/** Calls `fn` as Netlify calls a function, reads the body, checks what was handed over and settled. */
async function callAsNetlify(
  fn: (request: Request, context: Context) => Promise<Response> | Response,
  store: ReturnType<typeof memoryStore>,
): Promise<void> {
  const request = new Request("https://floodgate-test.netlify.app/api/chat", {
    headers: { "x-nf-client-connection-ip": "203.0.113.70" },
  });
  const handed: Promise<unknown>[] = [];
  const response = await fn(request, netlifyContext(request, handed));
  expect(response.status).toBe(200);
  expect(response.headers.get("ratelimit")).toMatch(/^"tokens";r=900;t=\d+$/); // the estimate held
  expect(await response.text()).toBe("chunk 1\nchunk 2\nchunk 3\n");
  // The client has its answer; the settlement is still under way, and was handed to waitUntil.
  expect(handed).toHaveLength(1);
  expect(await used(store)).toBe(100);
  await Promise.all(handed);
  expect(await used(store)).toBe(3);
}

describe("Netlify: work after the response goes to the Context's waitUntil", () => {
  afterEach(() => {
    delete (globalThis as { Netlify?: NetlifyGlobal }).Netlify;
  });

  it("withRateLimit as the function: the context Netlify passes beside the request", async () => {
    const store = memoryStore();
    const fn = withRateLimit((request: Request, _context: Context) => streamed(getRateLimit(request)), options(store));
    await callAsNetlify(fn, store);
  });

  it("Hono through hono/netlify: the context it passes on as c.env.context", async () => {
    const store = memoryStore();
    const app = new Hono<RateLimitEnv>();
    app.use("/api/*", rateLimit(options(store)));
    app.get("/api/chat", (c) => streamed(c.get("rateLimit")));
    const fn: (request: Request, context: Context) => Promise<Response> | Response = handle(app);
    await callAsNetlify(fn, store);
  });

  it("a function that does not pass its context on: Netlify.context", async () => {
    const store = memoryStore();
    const limited = withRateLimit((request: Request) => streamed(getRateLimit(request)), options(store));
    await callAsNetlify((request, context) => {
      // What Netlify's runtime sets for the request in flight.
      const netlify: NetlifyGlobal = {
        context,
        env: { delete: () => {}, get: () => undefined, has: () => false, set: () => {}, toObject: () => ({}) },
      };
      (globalThis as { Netlify?: NetlifyGlobal }).Netlify = netlify;
      return limited(request);
    }, store);
  });
});
