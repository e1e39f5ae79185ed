// Netlify Edge Functions run on Deno: an edge function wrapped by withRateLimit, bundled from
// core's dist (test/runtimes/netlify/edge-function.ts), run by the deno binary and called as
// Netlify calls it, with its Context (Netlify's published type). The settlement after the
// streamed response must be handed to `context.waitUntil` and be done once what was handed
// has resolved. Fails (never skips) when deno is missing.
//   npx vitest run test/runtimes/netlify-edge.test.ts
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { bundle, requireBinary, requireBuilt, ROOT } from "./support.ts";

describe("Netlify Edge Functions (Deno): a settlement after the response goes to context.waitUntil", () => {
  it("the client has its answer with the estimate held; what was handed to waitUntil settles the reported units", async () => {
    const deno = requireBinary("deno");
    requireBuilt(["core"]);
    const { code, inputs } = await bundle("test/runtimes/netlify/edge-function.ts", {
      format: "esm",
      conditions: ["deno", "worker", "browser", "import", "default"],
    });
    expect(inputs.some((file) => file.startsWith("packages/core/dist/"))).toBe(true);
    const dir = mkdtempSync(path.join(tmpdir(), "floodgate-netlify-edge-"));
    try {
      const file = path.join(dir, "edge-function.mjs");
      writeFileSync(file, code);
      const run = spawnSync(deno, ["run", "--no-prompt", file], { cwd: ROOT, encoding: "utf8", timeout: 60_000 });
      expect(run.stderr).toBe("");
      expect(run.status).toBe(0);
      expect(JSON.parse(run.stdout)).toEqual({
        runtime: "deno",
        status: 200,
        ratelimit: expect.stringMatching(/^"tokens";r=900;t=\d+$/),
        body: "chunk 1\nchunk 2\nchunk 3\n",
        handedAtAnswer: 1,
        usedAtAnswer: 100,
        usedAfter: 3,
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
