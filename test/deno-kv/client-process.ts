/**
 * One client process of test/deno-kv/concurrency.test.ts, run by the deno binary: opens the
 * database at argv[0], fires argv[2] concurrent decisions on one key of the policy set argv[1]
 * (limit 100 per hour) and prints how many were admitted, as JSON, when every one is decided.
 */
import { createRateLimiter } from "../../packages/core/src/index.ts";
import { denoKvStore } from "../../packages/deno-kv/src/index.ts";
import { policySet } from "./sets.ts";
import { openKv } from "./support.ts";

const [path, set, calls, prefix] = Deno.args as [string, string, string, string];
const kv = await openKv(path);
const store = denoKvStore({ kv, maxAttempts: 1000, timeoutMs: 120_000 });
const limiter = createRateLimiter({ policy: policySet(set, 100), store, prefix, resilience: false });
const decisions = await Promise.all(Array.from({ length: Number(calls) }, () => limiter.limit("hot")));
console.log(JSON.stringify({ admitted: decisions.filter((d) => d.allowed).length, ...store.stats() }));
kv.close();

declare const Deno: { args: string[] };
