// A Lambda function behind an API Gateway HTTP API (or a Function URL), rate limited per client
// address with DynamoDB as the shared store. Deploy with the table and IAM policy of
// docs/aws-lambda-and-dynamodb.md; RATE_LIMIT_TABLE names the table.
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { getRateLimit, withRateLimit } from "@floodgate/aws-lambda";
import { slidingWindow } from "@floodgate/core";
import { dynamoDBStore } from "@floodgate/dynamodb";
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from "aws-lambda";

// Module scope: built once per instance (at its cold start) and reused by every request it
// serves, so options are checked once and the client keeps its connections.
const store = dynamoDBStore({ client: new DynamoDBClient({}), table: process.env["RATE_LIMIT_TABLE"] ?? "rate-limits" });

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
