import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

const source = (pkg: string): string => fileURLToPath(new URL(`./packages/${pkg}/src/index.ts`, import.meta.url));

export default defineConfig({
  // Packages resolve to their source, so tests need no build.
  resolve: {
    alias: {
      "@floodgate/core": source("core"),
      "@floodgate/hono": source("hono"),
      "@floodgate/express": source("express"),
      "@floodgate/koa": source("koa"),
      "@floodgate/upstash-local": source("upstash-local"),
    },
  },
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
