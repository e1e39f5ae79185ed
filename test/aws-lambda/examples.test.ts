/**
 * The Lambda examples end to end: each handler module served by lambda-local (npm), a local
 * invoker that turns HTTP requests into HTTP API (payload 2.0) events and the handler's result
 * into the response, in its own process (a warm instance: module scope kept between requests);
 * the DynamoDB example against dynalite, the Upstash one through the local Upstash bridge.
 * lambda-local writes the result's body JSON-encoded (`JSON.stringify(body)`), so the tests
 * decode it once more; the status and headers it sends as the result gives them.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { createTable } from "@floodgate/dynamodb";
import { startUpstashBridge } from "@floodgate/upstash-local";
import { afterAll, describe, expect, it } from "vitest";
import { startRedis } from "../support/redis-server.ts";
import { startDynalite } from "../dynamodb/dynalite.ts";

const root = fileURLToPath(new URL("../..", import.meta.url));
const children: ChildProcess[] = [];
const cleanups: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const child of children.splice(0)) child.kill("SIGTERM");
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function serve(example: string, env: Record<string, string>): Promise<string> {
  const child = spawn(`${root}node_modules/.bin/tsx`, ["examples/aws-lambda/invoke-local.ts", `examples/aws-lambda/${example}`], {
    cwd: root,
    env: { ...process.env, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.push(child);
  let output = "";
  return await new Promise<string>((resolve, reject) => {
    child.stdout!.on("data", (chunk: Buffer) => {
      output += chunk.toString();
      const match = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(output);
      if (match) resolve(match[1]!);
    });
    child.stderr!.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.once("exit", (code) => reject(new Error(`${example} exited with ${code}:\n${output}`)));
  });
}

async function send(url: string, init?: RequestInit): Promise<{ status: number; headers: Headers; body: unknown }> {
  const response = await fetch(url, init);
  return { status: response.status, headers: response.headers, body: JSON.parse(JSON.parse(await response.text()) as string) };
}

/** Waits out the next minute boundary when it is less than 20 s away: the examples count in minutes on the real clock. */
async function clearOfMinuteBoundary(): Promise<void> {
  const left = 60_000 - (Date.now() % 60_000);
  if (left < 20_000) await new Promise((resolve) => setTimeout(resolve, left + 50));
}

async function exercise(base: string): Promise<void> {
  await clearOfMinuteBoundary();
  for (let i = 9; i >= 0; i--) {
    const reply = await send(`${base}/hello?x=1`);
    expect(reply.status).toBe(200);
    expect(reply.body).toEqual({ path: "/hello", remaining: i });
    expect(reply.headers.get("x-ratelimit-remaining")).toBe(String(i));
  }
  const limited = await send(`${base}/hello`);
  expect(limited.status).toBe(429);
  expect(Number(limited.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
  expect(limited.body).toMatchObject({ error: { code: "RATE_LIMITED" } });
  // Its own rule: the login limit is counted apart.
  const logins: number[] = [];
  for (let i = 0; i < 6; i++) logins.push((await send(`${base}/login`, { method: "POST", body: "{}" })).status);
  expect(logins).toEqual([200, 200, 200, 200, 200, 429]);
}

describe("Lambda examples through lambda-local (HTTP API events)", () => {
  it("examples/aws-lambda/dynamodb.ts: the wrapper and the DynamoDB store", async () => {
    const dynalite = await startDynalite();
    cleanups.push(() => dynalite.stop());
    await createTable(dynalite.client(), { table: "example-limits" });
    const base = await serve("dynamodb.ts", {
      // The SDK's own setting for an endpoint of its own: the example's code is what runs on AWS.
      AWS_ENDPOINT_URL_DYNAMODB: dynalite.endpoint,
      AWS_REGION: "us-east-1",
      AWS_ACCESS_KEY_ID: "local",
      AWS_SECRET_ACCESS_KEY: "local",
      RATE_LIMIT_TABLE: "example-limits",
    });
    await exercise(base);
  }, 120_000);

  it("examples/aws-lambda/upstash.ts: the wrapper and the Upstash store", async () => {
    const redis = await startRedis();
    cleanups.push(() => redis.stop());
    const bridge = await startUpstashBridge({ redis: { host: redis.host, port: redis.port } });
    cleanups.push(() => bridge.stop());
    const base = await serve("upstash.ts", { UPSTASH_REDIS_REST_URL: bridge.url, UPSTASH_REDIS_REST_TOKEN: bridge.token });
    await exercise(base);
  }, 120_000);
});
