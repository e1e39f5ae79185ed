import { FloodgateError } from "@floodgate/core/store";

/**
 * What the store needs of a client: `send(command)`. A `DynamoDBClient`, or a
 * `DynamoDBDocumentClient` (which passes the low-level commands through).
 */
export interface DynamoDBClientLike {
  /** Sends one command; resolves to its output. */
  send(command: never, options?: never): Promise<unknown>;
}

/** Options of {@link dynamoDBStore}. */
export interface DynamoDBStoreOptions {
  /**
   * A `DynamoDBClient` from `@aws-sdk/client-dynamodb`, or a `DynamoDBDocumentClient` from
   * `@aws-sdk/lib-dynamodb` (the store sends it the low-level commands, which it passes through).
   */
  client: DynamoDBClientLike;
  /** The table's name (created beforehand: `createTable`, or the definition in the guide). */
  table: string;
  /** The table's partition key, a string attribute. Default `"pk"`. */
  partitionKey?: string;
  /** The attribute DynamoDB's TTL is enabled on: every item carries it (epoch seconds). Default `"expiresAt"`. */
  ttlAttribute?: string;
  /**
   * Keys whose last-seen state the instance remembers, so a decision is one conditional write
   * instead of a read and a write. Default 10,000; 0 remembers none.
   */
  cacheSize?: number;
  /** Seconds added to every item's TTL beyond the moment its state stops mattering (clock skew, late refunds). Default 900. */
  ttlMarginSeconds?: number;
}

/** The options with every default filled in. */
export interface ParsedStoreOptions {
  readonly client: { send(command: unknown): Promise<unknown> };
  readonly table: string;
  readonly partitionKey: string;
  readonly ttlAttribute: string;
  readonly cacheSize: number;
  readonly ttlMarginSeconds: number;
}

const KNOWN = new Set(["client", "table", "partitionKey", "ttlAttribute", "cacheSize", "ttlMarginSeconds"]);
/** DynamoDB's rule for attribute and table names, loosely: 1-255 characters. */
const NAME = /^[\w.-]{1,255}$/;

function invalid(option: string, received: string, expected: string): FloodgateError {
  return new FloodgateError("INVALID_OPTION", `dynamoDBStore(): invalid option \`${option}\`: received ${received}; expected ${expected}.`);
}

const show = (v: unknown): string =>
  typeof v === "string" ? JSON.stringify(v) : v === null ? "null" : typeof v === "object" ? "an object" : String(v);

/** Validates the options once, at construction; a mistake is an INVALID_OPTION error naming the option. */
export function parseStoreOptions(options: DynamoDBStoreOptions): ParsedStoreOptions {
  if (typeof options !== "object" || options === null) throw invalid("options", show(options), "{ client, table }");
  for (const name of Object.keys(options)) {
    if (!KNOWN.has(name)) throw invalid(name, "it", `one of ${[...KNOWN].join(", ")} (unknown option)`);
  }
  const client = options.client as unknown as { send?: unknown };
  if (typeof client !== "object" || client === null || typeof client.send !== "function") {
    throw invalid(
      "client",
      show(client),
      "a DynamoDBClient (@aws-sdk/client-dynamodb) or a DynamoDBDocumentClient (@aws-sdk/lib-dynamodb)",
    );
  }
  const name = (option: "table" | "partitionKey" | "ttlAttribute", fallback?: string): string => {
    const value = options[option] ?? fallback;
    if (typeof value !== "string" || !NAME.test(value) || (option === "table" && value.length < 3)) {
      throw invalid(option, show(value), `a DynamoDB name: ${option === "table" ? 3 : 1}-255 letters, digits, _ - .`);
    }
    return value;
  };
  const whole = (option: "cacheSize" | "ttlMarginSeconds", fallback: number): number => {
    const value = options[option] ?? fallback;
    if (typeof value !== "number" || !Number.isInteger(value) || value < 0) throw invalid(option, show(value), "a whole number >= 0");
    return value;
  };
  const partitionKey = name("partitionKey", "pk");
  const ttlAttribute = name("ttlAttribute", "expiresAt");
  if (["v", "s"].includes(partitionKey) || ["v", "s", partitionKey].includes(ttlAttribute)) {
    throw invalid(
      partitionKey === ttlAttribute ? "ttlAttribute" : ["v", "s"].includes(partitionKey) ? "partitionKey" : "ttlAttribute",
      "a name the store's item already uses",
      'a name other than "v", "s" and the other attribute',
    );
  }
  return {
    client: client as ParsedStoreOptions["client"],
    table: name("table"),
    partitionKey,
    ttlAttribute,
    cacheSize: whole("cacheSize", 10_000),
    ttlMarginSeconds: whole("ttlMarginSeconds", 900),
  };
}
