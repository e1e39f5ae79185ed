// The timing stage (`npx vitest run --config vitest.timing.config.ts`): the suites in test/timing/,
// one file at a time, run alone after the other suites (scripts/test.mjs), so that nothing else
// loads the machine while they measure latency against a deadline. The aliases and timeouts are
// vitest.config.ts's; only which files run differs (replaced, not merged: mergeConfig would add
// every other test file to `include`).
import { defineConfig } from "vitest/config";
import base from "./vitest.config.ts";

export default defineConfig({
  ...base,
  test: {
    ...base.test,
    include: ["test/timing/**/*.test.ts"],
    exclude: ["**/node_modules/**"],
    fileParallelism: false,
  },
});
