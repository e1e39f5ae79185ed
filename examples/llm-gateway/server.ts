// An LLM gateway on Hono + Node: each API key gets 60 requests a minute, 20,000 tokens a minute
// and 2 requests in flight. A request reserves its estimate of tokens (prompt + max_tokens) when it
// arrives; the gateway reports the provider's `usage.total_tokens` as the stream goes, and the
// tokens actually used are settled when the response ends: completed, aborted by the client, or
// broken by the provider.
//   npm run build && npx tsx --tsconfig examples/tsconfig.json examples/llm-gateway/server.ts
// Upstream: LLM_URL (an OpenAI-style API), else a fake provider started here (fake-llm.ts).
// Store: Upstash Redis when UPSTASH_REDIS_REST_URL and UPSTASH_REDIS_REST_TOKEN are set (locally:
// `npm run upstash-local`), else in memory.
import { concurrency, fixedWindow, memoryStore, type RateLimitRequest, type RateLimitStore, upstashStore } from "@floodgate/core";
import { rateLimit, type RateLimitEnv } from "@floodgate/hono";
import { serve } from "@hono/node-server";
import { Redis } from "@upstash/redis";
import { type Context, Hono } from "hono";
import { promptTokens, startFakeLlm } from "./fake-llm.ts";

const env = globalThis.process?.env ?? {};
const onUpstash = Boolean(env.UPSTASH_REDIS_REST_URL && env.UPSTASH_REDIS_REST_TOKEN);
const store: RateLimitStore = onUpstash ? upstashStore({ redis: Redis.fromEnv() }) : memoryStore();
const upstream = env.LLM_URL ?? (await startFakeLlm()).url;

/** The caller's API key: `Authorization: Bearer <key>`. */
const apiKey = (req: RateLimitRequest<Context>): string | undefined => /^Bearer (.+)$/.exec(req.header("authorization") ?? "")?.[1];

/** The most a completion can use: its prompt's tokens plus `max_tokens`. */
async function estimateTokens(req: RateLimitRequest<Context>): Promise<number> {
  type Body = { messages?: { content?: unknown }[]; max_tokens?: number };
  const body: Body = await req.raw.req.json<Body>().catch(() => ({}));
  return promptTokens(body.messages ?? []) + (body.max_tokens ?? 256);
}

const app = new Hono<RateLimitEnv>();
app.use("/v1/*", async (c, next) => {
  if (c.req.header("authorization") === undefined) return c.json({ error: { message: "missing API key" } }, 401);
  await next();
});
// Requests first: a request refused here never reserves tokens. The unit in flight is released
// when the response ends, whichever way.
app.use(
  "/v1/*",
  rateLimit({
    store,
    prefix: "llm:requests:",
    key: apiKey,
    policy: [concurrency({ limit: 2, timeout: "5m", name: "in-flight" }), fixedWindow({ limit: 60, window: "1m", name: "requests" })],
  }),
);
// Then tokens: the estimate reserved now, what the handler reports settled when the response ends.
app.use(
  "/v1/*",
  rateLimit({
    store,
    prefix: "llm:tokens:",
    key: apiKey,
    policy: fixedWindow({ limit: 20_000, window: "1m", name: "tokens" }),
    cost: { estimate: estimateTokens },
  }),
);

/** The most one completion can use (the model's context window): what a usage report is bounded by. */
const MAX_TOKENS_PER_REQUEST = 128_000;

/** Passes the provider's events through, reporting each event's `usage.total_tokens`. */
function reportingUsage(report: (tokens: number) => void): TransformStream<string, string> {
  let buffered = "";
  return new TransformStream({
    transform(text, controller) {
      buffered += text;
      let end: number;
      while ((end = buffered.indexOf("\n\n")) !== -1) {
        const event = buffered.slice(0, end);
        buffered = buffered.slice(end + 2);
        const data = event.startsWith("data: ") ? event.slice(6) : "";
        if (data !== "" && data !== "[DONE]") {
          const tokens = (JSON.parse(data) as { usage?: { total_tokens?: number } }).usage?.total_tokens;
          // Bounded: an excess is charged past the limit, and a token bucket would stay empty
          // for as long as a broken provider's figure takes to refill.
          if (typeof tokens === "number") report(Math.min(tokens, MAX_TOKENS_PER_REQUEST));
        }
        controller.enqueue(`${event}\n\n`);
      }
    },
  });
}

app.post("/v1/chat/completions", async (c) => {
  const info = c.get("rateLimit");
  const body = await c.req.json<Record<string, unknown>>();
  const failure = c.req.header("x-fake-fail"); // passed on to the fake provider, for the test
  let answer: Response;
  try {
    answer = await fetch(`${upstream}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", ...(failure === undefined ? {} : { "x-fake-fail": failure }) },
      body: JSON.stringify({ ...body, stream: true }),
      signal: c.req.raw.signal,
    });
  } catch {
    info?.report(0); // nothing was generated: the whole estimate goes back
    return c.json({ error: { message: "the provider is unreachable" } }, 502);
  }
  if (!answer.ok || answer.body === null) {
    info?.report(0);
    return c.json({ error: { message: `the provider answered ${answer.status}` } }, 502);
  }
  const events = answer.body
    .pipeThrough(new TextDecoderStream())
    .pipeThrough(reportingUsage((tokens) => info?.report(tokens)))
    .pipeThrough(new TextEncoderStream());
  return new Response(events, { headers: { "content-type": "text/event-stream", "cache-control": "no-cache" } });
});

const port = Number(env.PORT ?? 3000);
serve({ fetch: app.fetch, port, hostname: env.HOST ?? "127.0.0.1" }, (info) => {
  const base = `http://127.0.0.1:${info.port}`;
  console.log(`Floodgate LLM gateway (${onUpstash ? "Upstash Redis" : "in-memory"} store, upstream ${upstream}) listening on ${base}
Try:
  curl -N ${base}/v1/chat/completions -H "authorization: Bearer key-1" -d '{"messages":[{"role":"user","content":"hello there"}],"max_tokens":8}'`);
});
