// withRateLimit: always a Promise<Response>; the handler reads the decision with getRateLimit(request).
import { fixedWindow, getRateLimit, ipKey, type RateLimitInfo, withRateLimit } from "@floodgate/core";

const policy = fixedWindow({ limit: 10, window: "1m" });

const handler = withRateLimit((request: Request) => {
  const info: RateLimitInfo | undefined = getRateLimit(request);
  return new Response(String(info?.remaining));
}, { policy, key: (req) => `${ipKey(req.ip, { ipv6Subnet: 56 })}:${req.path}` });
const answer: Promise<Response> = handler(new Request("http://localhost/"));
void answer;

// Extra arguments (Deno's info, Bun's server, a Worker's env and ctx) pass through, typed.
const worker = withRateLimit(
  (_request: Request, env: { REGION: string }) => new Response(env.REGION),
  { policy, getClientIp: (request, env) => request.headers.get("cf-connecting-ip") ?? env.REGION },
);
void worker(new Request("http://localhost/"), { REGION: "eu" });

// @ts-expect-error the wrapper returns a promise, never a bare Response
const bare: Response = handler(new Request("http://localhost/"));
void bare;

// @ts-expect-error ipKey takes an address (or undefined), not a request
ipKey(new Request("http://localhost/"));

// @ts-expect-error getRateLimit takes the Request
getRateLimit("/");

// The Workers line of docs/serverless.md, against a handler written as the README writes it (the
// request only): the Worker's env and ctx pass on to the wrapper, which hands ctx to waitUntil.
const readmeHandler = withRateLimit((_request: Request) => new Response("hello"), { policy });
const workerModule = {
  fetch: (request: Request, env: { REGION: string }, ctx: { waitUntil(promise: Promise<unknown>): void }) =>
    readmeHandler(request, env, ctx),
};
void workerModule;
// A handler that declares env still requires it, typed.
// @ts-expect-error env must be { REGION: string }
void worker(new Request("http://localhost/"), { REGION: 1 });
