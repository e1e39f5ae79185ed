import { storeContract } from "../stores/store-contract.ts";
import { ioredisHarness } from "./harness.ts";

storeContract("redisStore (ioredis)", ioredisHarness);
