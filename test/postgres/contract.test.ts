/**
 * The public store contract (@floodgate/testing, as a store author runs it), every capability
 * included (reservations, leases, blocks, racing clients), over both clients on a real
 * PostgreSQL server.
 */
import { describe, it } from "vitest";
import { storeContract } from "@floodgate/testing";
import { postgresUnavailable } from "../support/postgres-server.ts";
import { CLIENTS, postgresHarness } from "./harness.ts";

const unavailable = await postgresUnavailable();
if (unavailable !== undefined) {
  console.log(unavailable);
  describe.skip("postgresStore contract", () => it("needs PostgreSQL", () => undefined));
} else {
  for (const client of CLIENTS) {
    storeContract(`postgresStore (${client})`, async () => {
      const h = await postgresHarness(client);
      return { store: (clock) => h.store(clock, { sweepEvery: 0 }), close: () => h.close() };
    });
  }
}
