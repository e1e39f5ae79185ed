// The same function with Upstash Redis (over HTTP) as the shared store: UPSTASH_REDIS_REST_URL
// and UPSTASH_REDIS_REST_TOKEN in the function's environment.
import { getRateLimit, withRateLimit } from "@floodgate/aws-lambda";
import { slidingWindow, upstashStore } from "@floodgate/core";
import { Redis } from "@upstash/redis";
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from "aws-lambda";

// Module scope: one client per instance; the server's clock decides, whatever the instance's.
const store = upstashStore({ redis: Redis.fromEnv() });

async function app(event: APIGatewayProxyEventV2): Promise<APIGatewayProxyStructuredResultV2> {
  const rateLimit = getRateLimit(event);
  return {
    statusCode: 200,
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ path: event.rawPath, remaining: rateLimit?.remaining }),
  };
}

export const handler = withRateLimit(app, {
  store,
  rules: {
    "POST /login": slidingWindow({ limit: 5, window: "1m" }),
    default: slidingWindow({ limit: 10, window: "1m" }),
  },
});
