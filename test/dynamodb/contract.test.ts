/**
 * The store contract, run against a real DynamoDB-compatible server (dynalite, with the parts it
 * lacks added at the server as DynamoDB documents them: fixtures/dynalite-server.cjs), and once
 * against dynalite as published, whose failed conditions return no item (the store then reads).
 */
import { createTable, dynamoDBStore } from "@floodgate/dynamodb";
import { storeContract } from "../stores/store-contract.ts";
import { type Dynalite, startDynalite } from "./dynalite.ts";

let tables = 0;

for (const aws of [true, false]) {
  storeContract(`dynamoDBStore (dynalite${aws ? "" : " as published: no item on a failed condition"})`, async () => {
    const server: Dynalite = await startDynalite({ aws });
    const client = server.client();
    const table = `contract-${++tables}`;
    if (aws) await createTable(client, { table });
    else await createTable(client, { table }).catch(() => undefined); // no UpdateTimeToLive there: the table exists all the same
    return {
      store: () => dynamoDBStore({ client, table }),
      close: () => server.stop(),
    };
  });
}
