import { storeContract } from "../stores/store-contract.ts";
import { upstashHarness } from "./harness.ts";
import { redisKeyContract } from "./key-ttls.ts";

storeContract("upstashStore (real @upstash/redis client through the local bridge)", upstashHarness);
redisKeyContract("upstashStore (real @upstash/redis client through the local bridge)", upstashHarness);
