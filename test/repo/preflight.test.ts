// `npm test` checks the system packages first: with one missing and no way to install it, it stops
// before any check, printing the command that installs it. The PATH given to scripts/test.mjs holds
// only what each case needs; FLOODGATE_TEST_PREFLIGHT_NOT_ROOT makes a root run behave as a user's.
import { spawnSync } from "node:child_process";
import { chmodSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterEach, describe, expect, it } from "vitest";

const ROOT = resolve(import.meta.dirname, "../..");
const dirs: string[] = [];

/** A PATH directory holding node and, for each name, an executable that does nothing. */
function pathWith(...binaries: string[]): string {
  const dir = mkdtempSync(join(tmpdir(), "floodgate-preflight-"));
  dirs.push(dir);
  symlinkSync(process.execPath, join(dir, "node"));
  for (const name of binaries) {
    writeFileSync(join(dir, name), "#!/bin/sh\nexit 0\n");
    chmodSync(join(dir, name), 0o755);
  }
  return dir;
}

function preflight(path: string, env: Record<string, string> = {}) {
  const { FLOODGATE_TEST_PREFLIGHT_NOT_ROOT: _, ...inherited } = process.env;
  const result = spawnSync(process.execPath, ["scripts/test.mjs", "--preflight-only"], {
    cwd: ROOT,
    encoding: "utf8",
    env: { ...inherited, PATH: path, ...env },
    timeout: 30_000,
  });
  return { status: result.status, out: result.stdout + result.stderr };
}

afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe("npm test's system check", () => {
  it("passes when redis-server, redis-cli, chromium, valgrind and callgrind_control are on PATH", () => {
    const { status, out } = preflight(pathWith("redis-server", "redis-cli", "chromium", "valgrind", "callgrind_control"));
    expect(out).toBe("");
    expect(status).toBe(0);
  });

  it("without root, stops at once with the apt-get command for what is missing", () => {
    const { status, out } = preflight(pathWith("apt-get"), { FLOODGATE_TEST_PREFLIGHT_NOT_ROOT: "1" });
    expect(status).toBe(1);
    expect(out).toContain("redis-server and redis-cli not found on PATH");
    expect(out).toContain("chromium not found on PATH");
    expect(out).toContain("valgrind and callgrind_control not found on PATH");
    expect(out).toContain("sudo apt-get update && sudo apt-get install -y redis-server chromium valgrind");
    expect(out.trimEnd().endsWith("0 passed, 1 failed")).toBe(true);
    expect(out).not.toContain("▶");
  });

  it("names only the missing package", () => {
    const { status, out } = preflight(pathWith("apt-get", "redis-server", "redis-cli", "valgrind", "callgrind_control"), {
      FLOODGATE_TEST_PREFLIGHT_NOT_ROOT: "1",
    });
    expect(status).toBe(1);
    expect(out).toContain("sudo apt-get install -y chromium\n");
    expect(out).not.toContain("redis-server");
  });

  it("without apt-get, even as root, says what to install and does not try", () => {
    const { status, out } = preflight(pathWith("chromium", "valgrind", "callgrind_control"));
    expect(status).toBe(1);
    expect(out).toContain("apt-get is not available here: install redis-server with this system's package manager");
    expect(out).not.toContain("installing");
    expect(out.trimEnd().endsWith("0 passed, 1 failed")).toBe(true);
  });
});
