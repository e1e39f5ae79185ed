/**
 * The public store contract (@floodgate/testing, as a store author runs it), every capability
 * included (reservations, leases, blocks, racing clients), over both clients on a real
 * PostgreSQL server.
 */
import { describe, it } from "vitest";
import { storeContract } from "@floodgate/testing";
import { postgresUnavailable } from "../support/postgres-server.ts";
import { resilientStore } from "../../packages/core/src/index.ts";
import { CLIENTS, postgresHarness } from "./harness.ts";
import { SQL_KINDS } from "../support/kinds.ts";

// The suite's limiters keep the default 1 s deadline, which a loaded machine's commits (each
// waiting for its disk flush) can pass: the contract is about what the store decides, so its
// calls get 10 s here.
const patient = <S extends Parameters<typeof resilientStore>[0]>(store: S) => resilientStore(store, { timeoutMs: 10_000 });

const unavailable = await postgresUnavailable();
if (unavailable !== undefined) {
  console.log(unavailable);
  describe.skip("postgresStore contract", () => it("needs PostgreSQL", () => undefined));
} else {
  for (const client of CLIENTS) {
    // Durable tables: every test but the racing clients. 200 calls racing on one key commit one
    // after the other, each waiting for its WAL flush (about 5 ms on this machine's disk), past
    // the limiter's default 1 s deadline; concurrency.test.ts races them with no deadline.
    storeContract(`postgresStore (${client})`, async () => {
      const h = await postgresHarness(client);
      return { store: (clock) => patient(h.store(clock, { sweepEvery: 0 })), close: () => h.close() };
    }, { clients: false, kinds: SQL_KINDS });
    // UNLOGGED tables (no WAL flush per commit): the whole suite, racing clients included.
    storeContract(`postgresStore (${client}, UNLOGGED tables)`, async () => {
      const h = await postgresHarness(client, 10, true);
      return { store: (clock) => patient(h.store(clock, { sweepEvery: 0 })), close: () => h.close() };
    }, { kinds: SQL_KINDS });
  }
}
