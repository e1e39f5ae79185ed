#!/usr/bin/env node
// `npm run test:timing`: the latency bounds of store faults and stalls (test/faults/ and
// test/timing/ with FLOODGATE_TIMING_BOUNDS=1), which `npm test` records without asserting:
// a deadline's p99 within 10 ms, back on the store within 2 s. Run it alone on a quiet machine;
// docs/reliability.md records its figures.
import { spawnSync } from "node:child_process";
import { join, resolve } from "node:path";

const root = resolve(import.meta.dirname, "..");
const vitest = join(root, "node_modules", ".bin", "vitest");
const env = { ...process.env, FLOODGATE_TIMING_BOUNDS: "1" };
let failed = false;
for (const args of [["run", "test/faults"], ["run", "--config", "vitest.timing.config.ts"]]) {
  console.log(`\n▶ vitest ${args.join(" ")} (latency bounds asserted)`);
  const r = spawnSync(vitest, args, { cwd: root, stdio: "inherit", env });
  if (r.status !== 0) failed = true;
}
process.exit(failed ? 1 : 0);
