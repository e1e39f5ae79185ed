import { Ratelimit } from "@upstash/ratelimit";
import type { Redis } from "@upstash/redis";

type Handler = (request: Request) => Response | Promise<Response>;

/** 10 requests per 10 seconds and client IP (Vercel sets X-Real-IP) in front of `app`. */
export function limited(app: Handler, redis: Redis): Handler {
  const ratelimit = new Ratelimit({ redis, limiter: Ratelimit.fixedWindow(10, "10 s") });
  return async (request) => {
    const ip = request.headers.get("x-real-ip") ?? "anonymous";
    const { success, limit, remaining, reset } = await ratelimit.limit(ip);
    const headers = {
      "X-RateLimit-Limit": `${limit}`,
      "X-RateLimit-Remaining": `${remaining}`,
      "X-RateLimit-Reset": `${reset}`, // epoch milliseconds
    };
    if (!success) return new Response("Too many requests", { status: 429, headers });
    const response = await app(request);
    for (const [name, value] of Object.entries(headers)) response.headers.set(name, value);
    return response;
  };
}
