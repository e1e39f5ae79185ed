import { fileURLToPath } from "node:url";
import { configDefaults, defineConfig } from "vitest/config";

const source = (pkg: string, entry = "index.ts"): string => fileURLToPath(new URL(`./packages/${pkg}/src/${entry}`, import.meta.url));

export default defineConfig({
  // Packages resolve to their source, so tests need no build.
  resolve: {
    // Exact names: "@floodgate/core" must not also rewrite "@floodgate/core/http".
    alias: [
      { find: /^@floodgate\/core$/, replacement: source("core") },
      { find: /^@floodgate\/core\/http$/, replacement: source("core", "http/index.ts") },
      { find: /^@floodgate\/core\/store$/, replacement: source("core", "stores/index.ts") },
      { find: /^@floodgate\/hono$/, replacement: source("hono") },
      { find: /^@floodgate\/express$/, replacement: source("express") },
      { find: /^@floodgate\/koa$/, replacement: source("koa") },
      { find: /^@floodgate\/upstash-local$/, replacement: source("upstash-local") },
      { find: /^@floodgate\/postgres$/, replacement: source("postgres") },
      { find: /^@floodgate\/mysql$/, replacement: source("mysql") },
      { find: /^@floodgate\/cloudflare$/, replacement: source("cloudflare") },
      { find: /^@floodgate\/deno-kv$/, replacement: source("deno-kv") },
      { find: /^@floodgate\/opentelemetry$/, replacement: source("opentelemetry") },
      { find: /^@floodgate\/testing$/, replacement: source("testing") },
      { find: /^@floodgate\/aws-lambda$/, replacement: source("aws-lambda") },
      { find: /^@floodgate\/dynamodb$/, replacement: source("dynamodb") },
    ],
  },
  test: {
    include: ["test/**/*.test.ts"],
    // The timing stage runs alone, after the rest (vitest.timing.config.ts).
    exclude: [...configDefaults.exclude, "test/timing/**"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
