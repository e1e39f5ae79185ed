/**
 * A Floodgate store on Amazon DynamoDB (AWS SDK v3): every policy of a key in one item, each
 * decision one conditional write, DynamoDB's TTL on every item.
 *
 * @module @floodgate/dynamodb
 */
export { type DynamoDBStore, dynamoDBStore, type DynamoDBStoreOptions, type DynamoDBStoreStats } from "./store.ts";
export type { DynamoDBClientLike } from "./options.ts";
export { createTable, type CreateTableOptions, type CreateTableResult } from "./table.ts";
export { STORE_ACTIONS } from "./errors.ts";
