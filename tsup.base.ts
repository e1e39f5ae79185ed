import { defineConfig, type Options } from "tsup";

/**
 * Every package builds the same way: ESM + CJS + type declarations from its entries (by default
 * `src/index.ts` alone). tsup keeps a package's `dependencies` and `peerDependencies` external and
 * inlines the rest. With several entries, code splitting puts what they share in one chunk, in
 * CJS too: two copies of a module (one per entry) would make two `FloodgateError` classes, and
 * `instanceof` would fail across them.
 */
export function packageBuild(
  platform: NonNullable<Options["platform"]>,
  entry: Record<string, string> = { index: "src/index.ts" },
  overrides: Options = {},
): ReturnType<typeof defineConfig> {
  return defineConfig({
    entry,
    format: ["esm", "cjs"],
    dts: true,
    clean: true,
    splitting: Object.keys(entry).length > 1,
    target: "es2022",
    platform,
    sourcemap: false,
    tsconfig: "tsconfig.json",
    ...overrides,
  });
}
