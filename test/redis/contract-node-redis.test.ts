import { storeContract } from "../stores/store-contract.ts";
import { nodeRedisHarness } from "./harness.ts";
import { redisKeyContract } from "./key-ttls.ts";

storeContract("redisStore (node-redis)", nodeRedisHarness);
redisKeyContract("redisStore (node-redis)", nodeRedisHarness);
