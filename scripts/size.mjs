#!/usr/bin/env node
// Bundle size of what a user ships, min+gzip: esbuild bundles an entry from the packages' built
// ESM output (packages/*/dist: run `npm run build` first), minified, then node:zlib gzips it.
// `hono` and `@upstash/redis` stay external (the user ships them anyway); zod is included.
//
//   node scripts/size.mjs            measure, compare with scripts/size-budgets.json, exit 1 if over
//   node scripts/size.mjs --json     the same, figures as JSON on stdout
//   node scripts/size.mjs --why NAME list the biggest inputs of one entry (to see what makes it big)
import { build } from "esbuild";
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { gzipSync } from "node:zlib";

const root = resolve(import.meta.dirname, "..");
const budgetsFile = join(root, "scripts", "size-budgets.json");

/** What a user ships, per entry: the source of a one-file app importing the packages. */
export const ENTRIES = {
  // Everything @floodgate/core, the application entry, exports.
  "core": `export * from "@floodgate/core";`,
  // The Hono adapter plus everything both of core's entries export (an upper bound of a Hono app's Floodgate code).
  "core + hono adapter": `export * from "@floodgate/core"; export * from "@floodgate/core/http"; export * from "@floodgate/hono";`,
  // A typical Hono app: the middleware and one policy, on the default memory store.
  "hono app (typical)": `import { rateLimit } from "@floodgate/hono";
import { slidingWindow } from "@floodgate/core";
export default rateLimit({ policy: slidingWindow({ limit: 100, window: "1m" }) });`,
  // A limiter on Upstash: the Upstash store and what it needs from core.
  "core + upstash store": `import { Redis } from "@upstash/redis";
import { createRateLimiter, slidingWindow, upstashStore } from "@floodgate/core";
export const limiter = createRateLimiter({ policy: slidingWindow({ limit: 10, window: "1m" }), store: upstashStore({ redis: Redis.fromEnv() }) });`,
};

const EXTERNAL = ["hono", "hono/*", "@upstash/redis"];

export async function measure(name) {
  for (const file of ["core/dist/index.js", "core/dist/http.js", "hono/dist/index.js"]) {
    if (!existsSync(join(root, "packages", file))) {
      throw new Error(`packages/${file} is missing: run \`npm run build\` first`);
    }
  }
  const result = await build({
    stdin: { contents: ENTRIES[name], resolveDir: root, loader: "js", sourcefile: "entry.js" },
    bundle: true,
    minify: true,
    format: "esm",
    platform: "neutral",
    mainFields: ["module", "main"],
    conditions: ["import"],
    target: "es2022",
    external: EXTERNAL,
    write: false,
    metafile: true,
    // The root tsconfig maps @floodgate/* to source: measure the published dist instead.
    tsconfigRaw: "{}",
    logLevel: "silent",
  });
  const code = result.outputFiles[0].contents;
  return { min: code.length, gzip: gzipSync(code, { level: 9 }).length, metafile: result.metafile };
}

const kb = (bytes) => `${(bytes / 1024).toFixed(2)} KB`;

async function main() {
  const args = process.argv.slice(2);
  const why = args.indexOf("--why");
  if (why !== -1) {
    const name = args[why + 1];
    if (!(name in ENTRIES)) throw new Error(`unknown entry ${name}; one of: ${Object.keys(ENTRIES).join(", ")}`);
    const { metafile } = await measure(name);
    const output = Object.values(metafile.outputs)[0];
    const rows = Object.entries(output.inputs).sort((a, b) => b[1].bytesInOutput - a[1].bytesInOutput);
    for (const [file, { bytesInOutput }] of rows.slice(0, 40)) console.log(`${String(bytesInOutput).padStart(8)}  ${file}`);
    return;
  }
  const budgets = JSON.parse(readFileSync(budgetsFile, "utf8"));
  const figures = {};
  let over = 0;
  for (const name of Object.keys(ENTRIES)) {
    const { min, gzip } = await measure(name);
    const budget = budgets[name]?.gzip;
    figures[name] = { min, gzip, budget };
    const status = budget === undefined ? "NO BUDGET" : gzip > budget ? "OVER BUDGET" : "ok";
    if (status !== "ok") over++;
    if (!args.includes("--json")) {
      console.log(
        `${name.padEnd(22)} ${kb(min).padStart(10)} min  ${kb(gzip).padStart(9)} min+gzip  budget ${
          budget === undefined ? "-" : kb(budget)
        }  ${status}`,
      );
    }
  }
  if (args.includes("--json")) console.log(JSON.stringify(figures, null, 2));
  if (over > 0) {
    console.error(`${over} entr${over === 1 ? "y" : "ies"} over budget or without one (scripts/size-budgets.json)`);
    process.exit(1);
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await main();
