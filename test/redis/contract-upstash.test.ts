import { storeContract } from "../stores/store-contract.ts";
import { upstashHarness } from "./harness.ts";

storeContract("upstashStore (real @upstash/redis client through the local bridge)", upstashHarness);
