#!/usr/bin/env node
// `npm test`: every check the project has, in order, then one plain summary line
// "N passed, N failed" (tests of every runner plus the build and package checks).
//
// First, before anything else, the system packages the suites need (see SYSTEM_PACKAGES): when
// one is missing, it is installed with apt-get if this runs as root on a system that has apt-get;
// otherwise npm test stops at once, printing the command that installs it.
//
// Test-only switches (test/repo/preflight.test.ts uses them; nothing else should):
//   --preflight-only                      stop after that system check (exit 0 when all is there)
//   FLOODGATE_TEST_PREFLIGHT_NOT_ROOT=1   behave as if not root: never run apt-get, print the command
import { spawnSync } from "node:child_process";
import { accessSync, constants, existsSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import { delimiter, join, resolve } from "node:path";

const root = resolve(import.meta.dirname, "..");

/** Debian packages the suites need, each with the binaries that show it is installed. */
const SYSTEM_PACKAGES = [
  // test/support/redis-server.ts starts private servers; the cluster suite also needs redis-cli.
  { name: "redis-server", binaries: ["redis-server", "redis-cli"], for: "the Redis suites" },
  // test/runtimes/browser.test.ts drives Debian's Chromium through playwright-core.
  { name: "chromium", binaries: ["chromium"], for: "the browser test, test/runtimes/browser.test.ts" },
  // test/redis/script-instructions.test.ts counts the Redis scripts' instructions under callgrind.
  { name: "valgrind", binaries: ["valgrind", "callgrind_control"], for: "the Redis script instruction check" },
];

function onPath(binary) {
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    if (dir === "") continue;
    try {
      accessSync(join(dir, binary), constants.X_OK);
      return true;
    } catch {
      // not in this directory
    }
  }
  return false;
}

/** Ends npm test before any check ran, with the usual summary line. */
function stop(lines) {
  for (const line of lines) console.log(line);
  console.log("\n0 passed, 1 failed");
  process.exit(1);
}

function preflight() {
  const missing = () => SYSTEM_PACKAGES.filter((p) => !p.binaries.every(onPath));
  const needed = missing();
  if (needed.length === 0) return;
  for (const p of needed) {
    console.log(`${p.binaries.filter((b) => !onPath(b)).join(" and ")} not found on PATH (Debian package ${p.name}, for ${p.for}).`);
  }
  const names = needed.map((p) => p.name).join(" ");
  const isRoot = process.getuid?.() === 0 && process.env.FLOODGATE_TEST_PREFLIGHT_NOT_ROOT !== "1";
  if (!onPath("apt-get")) {
    stop([
      `apt-get is not available here: install ${names} with this system's package manager (on Debian or Ubuntu: \`sudo apt-get install -y ${names}\`), then run npm test again.`,
    ]);
  }
  if (!isRoot) {
    stop([
      `Install ${needed.length === 1 ? "it" : "them"}, then run npm test again:`,
      ``,
      `  sudo apt-get update && sudo apt-get install -y ${names}`,
    ]);
  }
  const update = spawnSync("apt-get", ["update", "-qq"], { stdio: "inherit" });
  if (update.status !== 0) stop([`apt-get update failed: run \`apt-get update && apt-get install -y ${names}\`, then npm test again.`]);
  for (const p of needed) {
    console.log(`installing ${p.name} with apt-get`);
    const install = spawnSync("apt-get", ["install", "-y", "-qq", p.name], {
      stdio: ["ignore", "ignore", "inherit"],
      env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" },
    });
    if (install.status !== 0) stop([`could not install ${p.name}: run \`apt-get install -y ${p.name}\` to see why.`]);
  }
  const still = missing();
  if (still.length > 0) {
    stop([`still not found on PATH after apt-get install: ${still.flatMap((p) => p.binaries).filter((b) => !onPath(b)).join(", ")}.`]);
  }
}

preflight();
if (process.argv.includes("--preflight-only")) process.exit(0);

const tmp = join(root, ".tmp");
mkdirSync(tmp, { recursive: true });
const bin = (name) => join(root, "node_modules", ".bin", name);
// Every npm package; the JSR ones (Deno) leave out the Node-only ones: upstash-local (node:http, a bin),
// testing (it runs in a test runner, npm only), mysql (mysql2 is a Node client), the AWS packages
// (Lambda runs them on Node; the AWS SDK comes from npm), and cloudflare, which imports workerd's
// own `cloudflare:workers`; opentelemetry is npm only (its peer, @opentelemetry/api, is an npm package).
const packages = [
  "core",
  "hono",
  "express",
  "koa",
  "upstash-local",
  "testing",
  "postgres",
  "mysql",
  "aws-lambda",
  "dynamodb",
  "cloudflare",
  "deno-kv",
  "opentelemetry",
].filter((p) => existsSync(join(root, "packages", p, "src", "index.ts")));
const jsrPackages = packages.filter((p) =>
  !["upstash-local", "testing", "mysql", "aws-lambda", "dynamodb", "cloudflare", "opentelemetry"].includes(p)
);

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

/** Names of failed tests, printed again above the summary so a truncated log still shows them. */
const failedNames = [];

/** The failed tests of a vitest JSON report: file, full name and the first line of the error. */
function vitestFailures(report) {
  const names = [];
  for (const file of report.testResults ?? []) {
    const where = file.name.startsWith(root) ? file.name.slice(root.length + 1) : file.name;
    const failedTests = (file.assertionResults ?? []).filter((t) => t.status === "failed");
    for (const t of failedTests) {
      const first = (t.failureMessages?.[0] ?? "").split("\n")[0].slice(0, 200);
      names.push(`${where} > ${t.fullName}${first ? `: ${first}` : ""}`);
    }
    if (failedTests.length === 0 && file.status === "failed") {
      names.push(`${where}: ${(file.message ?? "failed to run").split("\n")[0].slice(0, 200)}`);
    }
  }
  return names;
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
  if (counts.names) failedNames.push(...counts.names.map((name) => `${label}: ${name}`));
  if (!ok && counts.failed === 0) failed++;
}

check("typecheck (tsc)", bin("tsc"), ["-p", "tsconfig.json"]);
// Files that must compile, with `// @ts-expect-error` on every line that must not (tsc fails on an
// expected error that does not occur): the adapters' types, used as an app would, without casts.
check("type-level tests (tsc -p test/types: Hono, Koa, Express, fetch)", bin("tsc"), ["-p", "test/types"]);
check('type-level tests (tsc -p test/types/augment: import "@floodgate/express/augment")', bin("tsc"), ["-p", "test/types/augment"]);
check(
  "architecture: core imports no node:* or framework; adapters import only @floodgate/core/http; packages import only what they declare",
  "node",
  ["scripts/check-boundaries.mjs"],
);
check("build (tsup: ESM + CJS + types)", "npm", ["run", "build", "--silent"]);
for (const pkg of packages) {
  const cwd = join(root, "packages", pkg);
  check(`publint --strict @floodgate/${pkg}`, bin("publint"), ["--strict"], { cwd });
  // Every resolution profile (node10, node16 from CJS and ESM, bundler): a subpath such as
  // @floodgate/core/http needs its typesVersions entry under node10.
  check(`attw --pack @floodgate/${pkg} (every profile)`, bin("attw"), ["--pack", "."], { cwd });
}
// typedoc.json: warnings are errors, and every export of the public entries must be documented.
check("API reference (typedoc: every public export documented; `npm run docs:api` writes .tmp/api)", bin("typedoc"), []);
check("bundle size within budgets (scripts/size-budgets.json)", "node", ["scripts/size.mjs"]);
check("deno check (every JSR package's source, the Deno examples)", bin("deno"), [
  "check",
  ...jsrPackages.map((p) => `packages/${p}/src/index.ts`),
  "examples/deno/fetch.ts",
  "examples/deno/hono.ts",
  "examples/deno-kv/server.ts",
]);
// Every TypeScript and JavaScript file of the repository (the fmt and lint sections of deno.json).
check("formatting (deno fmt --check; `npm run format` rewrites the files)", bin("deno"), ["fmt", "--check"]);
check("deno lint (every TypeScript and JavaScript file)", bin("deno"), ["lint"]);
check("deno publish --dry-run (JSR: no slow types)", bin("deno"), ["publish", "--dry-run", "--allow-dirty"]);

const vitestReport = join(tmp, "vitest.json");
suite(
  "vitest (Node)",
  bin("vitest"),
  ["run", "--reporter=default", "--reporter=json", `--outputFile.json=${vitestReport}`],
  vitestReport,
  (r) => ({ passed: r.numPassedTests, failed: r.numFailedTests + (r.numRuntimeErrorTestSuites ?? 0), names: vitestFailures(r) }),
);

// Store stalls under load (test/timing/): alone, after the other Node suites. Here their behaviour
// is asserted (every request answered, none 5xx, back on the store); their latency bounds are
// asserted by `npm run test:timing` (scripts/test-timing.mjs), which a busy machine can miss.
const timingReport = join(tmp, "vitest-timing.json");
suite(
  "stalls: a 5 s redis-server stall under 200 clients, each integration and remote store; behaviour, latency recorded (vitest, test/timing, alone)",
  bin("vitest"),
  ["run", "--config", "vitest.timing.config.ts", "--reporter=default", "--reporter=json", `--outputFile.json=${timingReport}`],
  timingReport,
  (r) => ({ passed: r.numPassedTests, failed: r.numFailedTests + (r.numRuntimeErrorTestSuites ?? 0), names: vitestFailures(r) }),
);

/** Counts `<testcase>` elements and those holding a `<failure>` or `<error>` (named) in a JUnit report. */
function junitCounts(xml) {
  let passedCases = 0;
  let failedCases = 0;
  const names = [];
  for (const m of xml.matchAll(/<testcase\b([^>]*?)(\/>|>([\s\S]*?)<\/testcase>)/g)) {
    const body = m[3] ?? "";
    if (/<skipped/.test(body)) continue;
    if (/<(failure|error)\b/.test(body)) {
      failedCases++;
      const attr = (name) => m[1].match(new RegExp(`\\b${name}="([^"]*)"`))?.[1];
      names.push([attr("classname"), attr("name")].filter(Boolean).join(" > "));
    } else passedCases++;
  }
  return { passed: passedCases, failed: failedCases, names };
}
const junit = (path) => junitCounts(readFileSync(path, "utf8"));

// The same suites, unchanged, on the other runtimes (Deno maps "vitest" to test/portable/vitest-on-deno.ts).
const PORTABLE_SUITES = [
  "test/core/algorithms.property.test.ts",
  // Calendar periods from each runtime's own Intl time-zone data.
  "test/core/calendar-periods.test.ts",
  "test/core/calendar-window.test.ts",
  "test/core/limiter.test.ts",
  "test/core/memory-store.test.ts",
  "test/core/scenarios.test.ts",
  "test/core/sha256.test.ts",
  // The store contract: memory, the compare-and-set store over evaluateState, and Upstash through the local bridge over HTTP.
  "test/stores/memory-store.contract.test.ts",
  "test/stores/kv-store.contract.test.ts",
  "test/stores/state.test.ts",
  "test/redis/contract-upstash.test.ts",
  // The HTTP scenario table: Hono, Express, Koa and the fetch wrapper.
  "test/http/scenarios.test.ts",
];
const denoReport = join(tmp, "deno-junit.xml");
suite(
  "deno test (Deno)",
  bin("deno"),
  ["test", "-A", "--no-check", "--reporter=dot", `--junit-path=${denoReport}`, ...PORTABLE_SUITES],
  denoReport,
  () => junit(denoReport),
);
// The Deno KV store on Deno's own Deno.openKv() (local backend): the contract, the traces, leased
// mode, compound steps and exactness across 4 deno processes sharing one database (vitest runs the same files on
// Node through @deno/kv).
const denoKvReport = join(tmp, "deno-kv-junit.xml");
suite(
  "deno test: the Deno KV store on Deno.openKv() (test/deno-kv)",
  bin("deno"),
  [
    "test",
    "-A",
    "--no-check",
    "--unstable-kv",
    "--reporter=dot",
    `--junit-path=${denoKvReport}`,
    "test/deno-kv/contract.test.ts",
    "test/deno-kv/concurrency.test.ts",
    "test/deno-kv/compound.test.ts",
  ],
  denoKvReport,
  () => junit(denoKvReport),
);
const bunReport = join(tmp, "bun-junit.xml");
suite(
  "bun test (Bun)",
  bin("bun"),
  [
    "test",
    "--reporter=junit",
    `--reporter-outfile=${bunReport}`,
    ...PORTABLE_SUITES.map((f) => `./${f}`),
  ],
  bunReport,
  () => junit(bunReport),
);

if (failedNames.length > 0) console.log(`\nFailed tests:\n${failedNames.map((n) => `  ${n}`).join("\n")}`);
if (failures.length > 0) console.log(`\nFailed: ${failures.join("; ")}`);
console.log(`\n${passed} passed, ${failed} failed`);
process.exit(failed > 0 ? 1 : 0);
