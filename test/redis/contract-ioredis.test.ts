import { storeContract } from "../stores/store-contract.ts";
import { ioredisHarness } from "./harness.ts";
import { redisKeyContract } from "./key-ttls.ts";

storeContract("redisStore (ioredis)", ioredisHarness);
redisKeyContract("redisStore (ioredis)", ioredisHarness);
