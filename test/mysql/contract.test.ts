import { describe, it } from "vitest";
import { storeContract } from "../stores/store-contract.ts";
import { resilientStore } from "../../packages/core/src/index.ts";
import { type MysqlHarness, mysqlHarness } from "./harness.ts";
import { SQL_KINDS } from "../support/kinds.ts";

const h: MysqlHarness | undefined = await mysqlHarness();

if (h === undefined) describe.skip("store contract: mysql (no server)", () => it("skipped", () => undefined));
// The suite's limiters keep the default 1 s deadline, which a loaded machine's commits can pass:
// the contract is about what the store decides, so its calls get 10 s here.
else {
  const harness = h;
  storeContract("mysql (mysql2/promise pool, MariaDB or MySQL)", async () => ({
    store: (clock) => resilientStore(harness.store(clock), { timeoutMs: 10_000 }),
    close: () => harness.close(),
  }), { kinds: SQL_KINDS });
}
