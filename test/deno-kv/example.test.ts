// examples/deno-kv on the deno binary, imported as a Deno app imports (npm: specifiers, resolved
// to the packages' build in node_modules): two server processes sharing one KV database file
// share the limit, 5 per minute for a client whichever process answers.
//   npm run build && npx vitest run test/deno-kv/example.test.ts
import { type ChildProcess, spawn } from "node:child_process";
import { afterEach, expect, it } from "vitest";
import { requireBinary, requireBuilt, ROOT } from "../runtimes/support.ts";
import { databasePath } from "./support.ts";

const children: ChildProcess[] = [];
afterEach(async () => {
  for (const child of children.splice(0)) {
    if (child.exitCode !== null || child.signalCode !== null) continue;
    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.kill("SIGTERM"); // by its pid: only processes this test started
    await exited;
  }
});

/** Starts the example with PORT=0 on the database `kvPath`; resolves with its address. */
function server(kvPath: string): Promise<string> {
  const deno = requireBinary("deno");
  const args = ["run", "--unstable-kv", "--allow-net", "--allow-env", "--allow-read", "--allow-write", "examples/deno-kv/server.ts"];
  const child = spawn(deno, args, {
    cwd: ROOT,
    env: { ...process.env, PORT: "0", KV_PATH: kvPath, NO_COLOR: "1" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.push(child);
  let output = "";
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no "listening on" line within 30 s:\n${output}`)), 30_000);
    const read = (chunk: Buffer): void => {
      output += chunk.toString();
      const match = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]!);
      }
    };
    child.stdout!.on("data", read);
    child.stderr!.on("data", read);
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`the example exited with ${code}:\n${output}`));
    });
  });
}

it("examples/deno-kv: two processes on one database share a limit of 5 per minute", async () => {
  requireBuilt(["core", "deno-kv"]);
  const kvPath = databasePath();
  // One after the other: two deno processes creating the same database file at the same instant
  // can fail in Deno.openKv ("database is locked"), before any code of ours runs.
  const first = await server(kvPath);
  const second = await server(kvPath);
  for (let i = 0; i < 5; i++) {
    const response = await fetch(`${i % 2 === 0 ? first : second}/hello`);
    expect(response.status, `request ${i + 1}`).toBe(200);
    expect(response.headers.get("x-ratelimit-remaining")).toBe(String(4 - i));
    expect(await response.json()).toEqual({ hello: "deno kv", path: "/hello" });
  }
  for (const base of [first, second]) {
    const denied = await fetch(`${base}/hello`);
    expect(denied.status).toBe(429);
    expect(denied.headers.get("ratelimit-policy")).toBe('"5-per-1m";q=5;w=60');
    await denied.text();
  }
}, 90_000);
