import {
  CreateTableCommand,
  DescribeTableCommand,
  DescribeTimeToLiveCommand,
  ResourceInUseException,
  UpdateTimeToLiveCommand,
} from "@aws-sdk/client-dynamodb";
import { FloodgateError } from "@floodgate/core/store";
import type { DynamoDBClientLike } from "./options.ts";

/** Options of {@link createTable}. */
export interface CreateTableOptions {
  /** The table's name. */
  table: string;
  /** The partition key (a string attribute); the store's `partitionKey`. Default `"pk"`. */
  partitionKey?: string;
  /** The attribute to enable DynamoDB's TTL on; the store's `ttlAttribute`. Default `"expiresAt"`. */
  ttlAttribute?: string;
  /** How long to wait for the table to become active, ms. Default 60,000. */
  timeoutMs?: number;
}

/** What {@link createTable} did. */
export interface CreateTableResult {
  /** False when the table existed already (its TTL is still made sure of). */
  readonly created: boolean;
}

type Send = (command: unknown) => Promise<unknown>;

/**
 * Creates the store's table (on-demand capacity, a string partition key) and enables TTL on
 * its expiry attribute, then waits until it is active: for a deploy script or a test, never the
 * request path. A table that exists already is left as it is, but gets its TTL enabled. The
 * same definition as CloudFormation, SAM and CDK is in docs/aws-lambda-and-dynamodb.md.
 *
 * @example
 * await createTable(new DynamoDBClient({}), { table: "rate-limits" });
 */
export async function createTable(client: DynamoDBClientLike, options: CreateTableOptions): Promise<CreateTableResult> {
  const send = (client as unknown as { send: Send }).send.bind(client) as Send;
  const { table, partitionKey = "pk", ttlAttribute = "expiresAt", timeoutMs = 60_000 } = options;
  let created = true;
  try {
    await send(
      new CreateTableCommand({
        TableName: table,
        AttributeDefinitions: [{ AttributeName: partitionKey, AttributeType: "S" }],
        KeySchema: [{ AttributeName: partitionKey, KeyType: "HASH" }],
        BillingMode: "PAY_PER_REQUEST",
      }),
    );
  } catch (error) {
    if (!(error instanceof ResourceInUseException) && (error as Error)?.name !== "ResourceInUseException") {
      throw wrapped(error, table, "CreateTable");
    }
    created = false;
  }
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const described = await send(new DescribeTableCommand({ TableName: table })) as { Table?: { TableStatus?: string } };
    if (described.Table?.TableStatus === "ACTIVE") break;
    if (Date.now() > deadline) {
      throw new FloodgateError("STORE_ERROR", `createTable(): table ${JSON.stringify(table)} was not active after ${timeoutMs} ms.`);
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  const ttl = await send(new DescribeTimeToLiveCommand({ TableName: table })).catch((error) => {
    throw wrapped(error, table, "DescribeTimeToLive");
  }) as { TimeToLiveDescription?: { TimeToLiveStatus?: string; AttributeName?: string } };
  const status = ttl.TimeToLiveDescription?.TimeToLiveStatus;
  if (status !== "ENABLED" && status !== "ENABLING") {
    await send(
      new UpdateTimeToLiveCommand({ TableName: table, TimeToLiveSpecification: { AttributeName: ttlAttribute, Enabled: true } }),
    ).catch((error) => {
      throw wrapped(error, table, "UpdateTimeToLive");
    });
  } else if (ttl.TimeToLiveDescription?.AttributeName !== ttlAttribute) {
    throw new FloodgateError(
      "STORE_ERROR",
      `createTable(): table ${JSON.stringify(table)} has TTL on ${JSON.stringify(ttl.TimeToLiveDescription?.AttributeName)}, not ${
        JSON.stringify(ttlAttribute)
      }: pass that name as \`ttlAttribute\` to the store and here, or use another table.`,
    );
  }
  return { created };
}

function wrapped(error: unknown, table: string, action: string): FloodgateError {
  const name = (error as { name?: unknown })?.name;
  const said = (error as { message?: unknown })?.message;
  const hint = name === "AccessDeniedException"
    ? ` The caller needs dynamodb:${action} (and dynamodb:DescribeTable) on the table: deploy tools usually have it, the function's role should not.`
    : name === "UnknownOperationException"
    ? " This DynamoDB-compatible server does not implement it."
    : "";
  return new FloodgateError("STORE_ERROR", `createTable(): ${action} of ${JSON.stringify(table)} failed: ${String(said ?? name)}.${hint}`, {
    cause: error,
  });
}
