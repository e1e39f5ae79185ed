#!/usr/bin/env node
// `npm test`: every check the project has, in order, then one plain summary line
// "N passed, N failed" (tests of every runner plus the build and package checks).
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import { join, resolve } from "node:path";

const root = resolve(import.meta.dirname, "..");
const tmp = join(root, ".tmp");
mkdirSync(tmp, { recursive: true });
const bin = (name) => join(root, "node_modules", ".bin", name);
// Every npm package; the JSR ones (Deno) leave out upstash-local, a Node-only tool (node:http, a bin).
const packages = ["core", "hono", "express", "koa", "upstash-local"].filter((p) => existsSync(join(root, "packages", p, "src", "index.ts")));
const jsrPackages = packages.filter((p) => p !== "upstash-local");

let passed = 0;
let failed = 0;
const failures = [];

function run(label, command, args, options = {}) {
  console.log(`\n▶ ${label}`);
  const started = Date.now();
  const result = spawnSync(command, args, { cwd: options.cwd ?? root, stdio: "inherit", env: { ...process.env, ...options.env } });
  const ok = result.status === 0;
  console.log(`${ok ? "✔" : "✘"} ${label} (${((Date.now() - started) / 1000).toFixed(1)} s)`);
  return ok;
}

/** A check that counts as one test. */
function check(label, command, args, options) {
  if (run(label, command, args, options)) passed++;
  else {
    failed++;
    failures.push(label);
  }
}

/** A test runner whose own counts are read from a JSON report. */
function suite(label, command, args, reportPath, count, options) {
  rmSync(reportPath, { force: true });
  const ok = run(label, command, args, options);
  let counts;
  try {
    counts = count(reportPath.endsWith(".json") ? JSON.parse(readFileSync(reportPath, "utf8")) : undefined);
  } catch {
    counts = undefined;
  }
  if (!counts) {
    failed++;
    failures.push(`${label}: no report`);
    return;
  }
  passed += counts.passed;
  failed += counts.failed;
  if (counts.failed > 0 || !ok) failures.push(`${label}: ${counts.failed} failed`);
  if (!ok && counts.failed === 0) failed++;
}

check("typecheck (tsc)", bin("tsc"), ["-p", "tsconfig.json"]);
check("architecture: core imports no node:* or framework; adapters use core's public entry; packages import only what they declare", "node", ["scripts/check-boundaries.mjs"]);
check("build (tsup: ESM + CJS + types)", "npm", ["run", "build", "--silent"]);
for (const pkg of packages) {
  const cwd = join(root, "packages", pkg);
  check(`publint --strict @floodgate/${pkg}`, bin("publint"), ["--strict"], { cwd });
  check(`attw --pack @floodgate/${pkg}`, bin("attw"), ["--pack", ".", "--profile", "node16"], { cwd });
}
check("bundle size within budgets (scripts/size-budgets.json)", "node", ["scripts/size.mjs"]);
check("deno check (every JSR package's source, the Deno examples)", bin("deno"), ["check", ...jsrPackages.map((p) => `packages/${p}/src/index.ts`), "examples/deno/fetch.ts", "examples/deno/hono.ts"]);
check("deno lint (every JSR package, the Deno examples)", bin("deno"), ["lint", ...jsrPackages.map((p) => `packages/${p}/src`), "examples/deno"]);
check("deno publish --dry-run (JSR: no slow types)", bin("deno"), ["publish", "--dry-run", "--allow-dirty"]);

const vitestReport = join(tmp, "vitest.json");
suite(
  "vitest (Node)",
  bin("vitest"),
  ["run", "--reporter=default", "--reporter=json", `--outputFile.json=${vitestReport}`],
  vitestReport,
  (r) => ({ passed: r.numPassedTests, failed: r.numFailedTests + (r.numRuntimeErrorTestSuites ?? 0) }),
);

/** Counts `<testcase>` elements and those holding a `<failure>` or `<error>` in a JUnit report. */
function junitCounts(xml) {
  let passedCases = 0;
  let failedCases = 0;
  for (const m of xml.matchAll(/<testcase\b[^>]*?(\/>|>([\s\S]*?)<\/testcase>)/g)) {
    const body = m[2] ?? "";
    if (/<skipped/.test(body)) continue;
    if (/<(failure|error)\b/.test(body)) failedCases++;
    else passedCases++;
  }
  return { passed: passedCases, failed: failedCases };
}
const junit = (path) => junitCounts(readFileSync(path, "utf8"));

// The same suites, unchanged, on the other runtimes (Deno maps "vitest" to test/portable/vitest-on-deno.ts).
const PORTABLE_SUITES = [
  "test/core/algorithms.property.test.ts",
  "test/core/limiter.test.ts",
  "test/core/memory-store.test.ts",
  "test/core/scenarios.test.ts",
  // The store contract: memory, and Upstash through the local bridge over HTTP.
  "test/stores/memory-store.contract.test.ts",
  "test/redis/contract-upstash.test.ts",
  // The HTTP scenario table: Hono, Express, Koa and the fetch wrapper.
  "test/http/scenarios.test.ts",
];
const denoReport = join(tmp, "deno-junit.xml");
suite("deno test (Deno)", bin("deno"), ["test", "-A", "--no-check", "--reporter=dot", `--junit-path=${denoReport}`, ...PORTABLE_SUITES], denoReport, () => junit(denoReport));
const bunReport = join(tmp, "bun-junit.xml");
suite("bun test (Bun)", bin("bun"), ["test", "--reporter=junit", `--reporter-outfile=${bunReport}`, ...PORTABLE_SUITES.map((f) => `./${f}`)], bunReport, () => junit(bunReport));

if (failures.length > 0) console.log(`\nFailed: ${failures.join("; ")}`);
console.log(`\n${passed} passed, ${failed} failed`);
process.exit(failed > 0 ? 1 : 0);
