/**
 * The copies of Floodgate a benchmark measures side by side: the working tree's, and with
 * `--baseline <dir>` a second one, a checkout of an earlier commit made by
 * `scripts/bench-baseline.sh <commit> [dir]`. Both are loaded the same way, through their
 * packages' public entries (`packages/<name>/src/index.ts`), never an internal file, so a
 * comparison keeps working when the code behind the entries is reorganized.
 *
 * Measuring both in the same run matters on a shared machine: timings of the same code move by
 * up to 2× between runs, while two subjects interleaved in one run see the same load.
 */
import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

export type Core = typeof import("../packages/core/src/index.ts");

export interface Copy {
  /** "" for the working tree, " (baseline)" for the baseline: appended to a row's name. */
  readonly suffix: string;
  /** The copy's repository root. */
  readonly root: string;
}

export const CURRENT_ROOT = fileURLToPath(new URL("..", import.meta.url)).replace(/\/$/, "");
export const BASELINE_SUFFIX = " (baseline)";

/** The value of `--baseline <dir>` in `argv`, checked, as an absolute path; undefined without the flag. */
export function baselineRoot(argv: readonly string[] = process.argv): string | undefined {
  const i = argv.indexOf("--baseline");
  if (i === -1) return undefined;
  const dir = argv[i + 1];
  if (dir === undefined || dir.startsWith("--")) {
    throw new Error("--baseline needs a directory (make one with scripts/bench-baseline.sh <commit> [dir])");
  }
  const root = path.resolve(dir);
  if (!existsSync(path.join(root, "packages/core/src/index.ts"))) {
    throw new Error(`--baseline ${dir}: no packages/core/src/index.ts there (make the copy with scripts/bench-baseline.sh <commit> [dir])`);
  }
  if (!existsSync(path.join(root, "node_modules"))) {
    throw new Error(`--baseline ${dir}: no node_modules there (scripts/bench-baseline.sh links them)`);
  }
  return root;
}

/** The working tree's copy, then the baseline's when `--baseline` is given. */
export function copies(argv: readonly string[] = process.argv): Copy[] {
  const baseline = baselineRoot(argv);
  return [{ suffix: "", root: CURRENT_ROOT }, ...(baseline === undefined ? [] : [{ suffix: BASELINE_SUFFIX, root: baseline }])];
}

/**
 * A copy's `@floodgate/core`, from its public entry. Core imports nothing of Floodgate's by
 * package name, so this loads exactly that copy's code whatever the current directory.
 */
export async function loadCore(copy: Copy): Promise<Core> {
  return (await import(pathToFileURL(path.join(copy.root, "packages/core/src/index.ts")).href)) as Core;
}

/**
 * The environment and working directory for a child process (run with `node --import tsx`)
 * that imports a copy's packages by name (`@floodgate/hono`, ...): tsx maps those names through
 * the `paths` of the tsconfig it finds, in every file it loads, a copy's adapters included. So the
 * child runs in the copy's root with the copy's tsconfig, and the adapters load that copy's core.
 */
export function childOf(copy: Copy): { cwd: string; env: NodeJS.ProcessEnv } {
  return { cwd: copy.root, env: { ...process.env, TSX_TSCONFIG_PATH: path.join(copy.root, "tsconfig.json") } };
}
