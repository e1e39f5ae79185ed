import { storeContract } from "../stores/store-contract.ts";
import { nodeRedisHarness } from "./harness.ts";

storeContract("redisStore (node-redis)", nodeRedisHarness);
