import { defineConfig, type Options } from "tsup";

/**
 * Every package builds the same way: ESM + CJS + type declarations from `src/index.ts`.
 * tsup keeps a package's `dependencies` and `peerDependencies` external and inlines the rest.
 */
export function packageBuild(platform: NonNullable<Options["platform"]>, overrides: Options = {}): ReturnType<typeof defineConfig> {
  return defineConfig({
    entry: ["src/index.ts"],
    format: ["esm", "cjs"],
    dts: true,
    clean: true,
    target: "es2022",
    platform,
    sourcemap: false,
    tsconfig: "tsconfig.json",
    ...overrides,
  });
}
