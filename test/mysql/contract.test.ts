import { describe, it } from "vitest";
import { storeContract } from "../stores/store-contract.ts";
import { type MysqlHarness, mysqlHarness } from "./harness.ts";

const h: MysqlHarness | undefined = await mysqlHarness();

if (h === undefined) describe.skip("store contract: mysql (no server)", () => it("skipped", () => undefined));
else storeContract("mysql (mysql2/promise pool, MariaDB or MySQL)", async () => h);
