// The store contract, the equivalence traces and leased mode on denoKvStore over a local Deno KV
// database: under Deno (`deno test --unstable-kv`, Deno.openKv(); npm test runs it so) and under
// Node (vitest, @deno/kv's openKv()).
//   npx vitest run test/deno-kv
//   node_modules/.bin/deno test -A --no-check --unstable-kv test/deno-kv/contract.test.ts
import { afterAll, beforeAll, describe } from "vitest";
import { denoKvStore } from "../../packages/deno-kv/src/index.ts";
import { equivalenceTraces } from "../stores/equivalence-traces.ts";
import { leaseChecks } from "../stores/lease-checks.ts";
import { storeContract } from "../stores/store-contract.ts";
import { type ClosableKv, openKv, runtime } from "./support.ts";

storeContract(`denoKvStore (${runtime === "deno" ? "Deno.openKv" : "@deno/kv on Node"}, local backend)`, async () => {
  const kv = await openKv();
  return {
    // Deno KV offers no clock: both modes run on the limiter's.
    store: () => denoKvStore({ kv }),
    close: async () => kv.close(),
  };
});

describe(`denoKvStore (${runtime}): equivalence and leased mode`, () => {
  let kv: ClosableKv;
  beforeAll(async () => {
    kv = await openKv();
  });
  afterAll(() => kv?.close());
  equivalenceTraces(() => denoKvStore({ kv }));
  leaseChecks(() => denoKvStore({ kv }));
});
