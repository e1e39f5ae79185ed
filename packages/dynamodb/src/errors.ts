import { FloodgateError } from "@floodgate/core/store";

/** What the store was doing when DynamoDB refused, for the message. */
export type Operation = "GetItem" | "PutItem" | "DeleteItem" | "TransactWriteItems";

/** The permissions the store needs, in the words of an IAM policy. */
export const STORE_ACTIONS = ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:DeleteItem"] as const;

const GUIDE = "docs/aws-lambda-and-dynamodb.md";

/**
 * An AWS SDK error as a FloodgateError that names the fix: a missing table, a missing
 * permission, an item grown past DynamoDB's 400 KB; anything else keeps AWS's own words.
 */
export function storeError(error: unknown, table: string, operation: Operation): FloodgateError {
  if (error instanceof FloodgateError) return error;
  const name = (error as { name?: unknown })?.name;
  const said = (error as { message?: unknown })?.message;
  const aws = typeof said === "string" && said !== "" ? ` (AWS: ${said})` : "";
  if (name === "ResourceNotFoundException") {
    return new FloodgateError(
      "STORE_ERROR",
      `dynamoDBStore: table ${
        JSON.stringify(table)
      } does not exist in the client's account and region${aws}. Create it once, outside the request path: \`await createTable(client, { table: ${
        JSON.stringify(table)
      } })\` from @floodgate/dynamodb, or deploy the CloudFormation/SAM/CDK definition in ${GUIDE}.`,
      { cause: error },
    );
  }
  if (name === "AccessDeniedException" || name === "UnrecognizedClientException" || name === "AccessDenied") {
    return new FloodgateError(
      "STORE_ERROR",
      `dynamoDBStore: DynamoDB refused ${operation} on table ${JSON.stringify(table)}${aws}. The function's role needs ${
        STORE_ACTIONS.join(", ")
      } on the table's ARN (the IAM policy in ${GUIDE}).`,
      { cause: error },
    );
  }
  if (name === "ValidationException" && typeof said === "string" && /item size/i.test(said)) {
    return new FloodgateError(
      "STORE_ERROR",
      `dynamoDBStore: a key's state outgrew DynamoDB's 400 KB item${aws}. A sliding log keeps one timestamp per admitted unit: use a sliding window or a token bucket for limits in the thousands.`,
      { cause: error },
    );
  }
  return new FloodgateError("STORE_ERROR", `dynamoDBStore: ${operation} on table ${JSON.stringify(table)} failed${aws}.`, { cause: error });
}
