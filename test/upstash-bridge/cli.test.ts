/**
 * The `upstash-local` bin as a user runs it: a separate process in front of a private
 * redis-server, driven by the real `@upstash/redis` client through the URL and token it prints,
 * stopped with SIGTERM.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { Redis } from "@upstash/redis";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { connectResp, replyToText } from "../../packages/upstash-local/src/resp.ts";
import { freePort, type RedisInstance, startRedis } from "../support/redis-server.ts";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const CLI = fileURLToPath(new URL("../../packages/upstash-local/src/cli.ts", import.meta.url));

interface Cli {
  child: ChildProcess;
  stdout: string;
  stderr: string;
  /** The KEY=VALUE lines printed on stdout. */
  env: Record<string, string>;
  exited: Promise<number | null>;
}

const running = new Set<ChildProcess>();

/** Spawns the bin; resolves once it printed both variables and its announcement, or once it exited. */
function startCli(args: string[]): Promise<Cli> {
  const child = spawn(process.execPath, ["--import", "tsx", CLI, ...args], {
    cwd: ROOT,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, REDIS_URL: "" },
  });
  running.add(child);
  const cli: Cli = {
    child,
    stdout: "",
    stderr: "",
    env: {},
    exited: new Promise((resolve) =>
      child.once("exit", (code) => {
        running.delete(child);
        resolve(code);
      })
    ),
  };
  return new Promise((resolve) => {
    const resolveWhenReady = (): void => {
      const announced = cli.env["UPSTASH_REDIS_REST_URL"] !== undefined && cli.env["UPSTASH_REDIS_REST_TOKEN"] !== undefined;
      if (announced && cli.stderr.includes("Ctrl-C to stop")) resolve(cli);
    };
    child.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
      cli.stdout += chunk;
      for (const line of cli.stdout.split("\n")) {
        const eq = line.indexOf("=");
        if (eq > 0) cli.env[line.slice(0, eq)] = line.slice(eq + 1);
      }
      resolveWhenReady();
    });
    child.stderr!.setEncoding("utf8").on("data", (chunk: string) => {
      cli.stderr += chunk;
      resolveWhenReady();
    });
    void cli.exited.then(() => resolve(cli));
  });
}

const client = (url: string, token: string): Redis =>
  new Redis({ url, token, retry: { retries: 0 }, enableTelemetry: false, enableAutoPipelining: false });

let redis: RedisInstance;

beforeAll(async () => {
  redis = await startRedis();
  // Password-protected after start (the helper's readiness PING runs without AUTH).
  const admin = await connectResp(redis.target);
  await admin.call("CONFIG", "SET", "requirepass", "s3cret");
  admin.destroy();
}, 30_000);

afterEach(() => {
  for (const child of running) if (child.pid !== undefined) process.kill(child.pid, "SIGKILL");
});

afterAll(async () => {
  await redis?.stop();
});

describe("upstash-local (the bin)", () => {
  it("prints the variables Redis.fromEnv() reads, serves @upstash/redis on them against the Redis it was given, and stops with exit 0 on SIGTERM", async () => {
    const cli = await startCli(["--redis", `redis://:s3cret@127.0.0.1:${redis.port}/3`]);
    expect(cli.stderr).toContain("Ctrl-C to stop");
    expect(cli.stdout).toMatch(/^UPSTASH_REDIS_REST_URL=http:\/\/127\.0\.0\.1:\d+\nUPSTASH_REDIS_REST_TOKEN=[\w-]{20,}\n$/);
    expect(cli.stderr).not.toContain("s3cret");

    const previous = { url: process.env["UPSTASH_REDIS_REST_URL"], token: process.env["UPSTASH_REDIS_REST_TOKEN"] };
    Object.assign(process.env, cli.env);
    let fromEnv: Redis;
    try {
      fromEnv = Redis.fromEnv({ retry: { retries: 0 }, enableTelemetry: false });
    } finally {
      for (const [key, value] of [["UPSTASH_REDIS_REST_URL", previous.url], ["UPSTASH_REDIS_REST_TOKEN", previous.token]] as const) {
        if (value === undefined) delete process.env[key];
        else process.env[key] = value;
      }
    }
    await fromEnv.set("greeting", "bar", { ex: 60 });
    expect(await fromEnv.get("greeting")).toBe("bar");
    expect(await fromEnv.incr("hits")).toBe(1);

    // The value lives in database 3 of the password-protected server, as the URL said.
    const admin = await connectResp(redis.target);
    try {
      expect(replyToText(await admin.pipeline([["AUTH", "s3cret"], ["SELECT", "3"], ["GET", "greeting"]]))).toEqual(["OK", "OK", "bar"]);
    } finally {
      admin.destroy();
    }

    const url = new URL(cli.env["UPSTASH_REDIS_REST_URL"]!);
    cli.child.kill("SIGTERM");
    expect(await cli.exited).toBe(0);
    await expect(fetch(url, { method: "POST", body: '["ping"]' })).rejects.toThrow();
  });

  it("enforces the token: a wrong or missing bearer token gets 401 and runs nothing", async () => {
    const port = await freePort();
    const cli = await startCli(["--redis", `redis://:s3cret@127.0.0.1:${redis.port}`, "--port", String(port), "--token", "dev-token"]);
    expect(cli.env).toEqual({ UPSTASH_REDIS_REST_URL: `http://127.0.0.1:${port}`, UPSTASH_REDIS_REST_TOKEN: "dev-token" });
    const url = cli.env["UPSTASH_REDIS_REST_URL"]!;

    await expect(client(url, "wrong").set("stolen", "1")).rejects.toThrow(/Unauthorized/);
    const anonymous = await fetch(url, { method: "POST", body: '["set","stolen","1"]' });
    expect(anonymous.status).toBe(401);
    expect(await anonymous.json()).toEqual({ error: "Unauthorized" });
    expect(await client(url, "dev-token").exists("stolen")).toBe(0);
    expect(await client(url, "dev-token").ping()).toBe("PONG");

    cli.child.kill("SIGINT");
    expect(await cli.exited).toBe(0);
  });

  it("answers CORS preflights from --cors-origin only", async () => {
    const cli = await startCli(["--redis", `redis://:s3cret@127.0.0.1:${redis.port}`, "--cors-origin", "http://127.0.0.1:8080"]);
    const url = cli.env["UPSTASH_REDIS_REST_URL"]!;
    const preflight = (origin: string): Promise<Response> =>
      fetch(url, {
        method: "OPTIONS",
        headers: { origin, "access-control-request-method": "POST", "access-control-request-headers": "authorization" },
      });
    const allowed = await preflight("http://127.0.0.1:8080");
    expect(allowed.status).toBe(204);
    expect(allowed.headers.get("access-control-allow-origin")).toBe("http://127.0.0.1:8080");
    const other = await preflight("http://evil.example");
    expect(other.headers.get("access-control-allow-origin")).toBeNull();
    cli.child.kill("SIGTERM");
    expect(await cli.exited).toBe(0);
  });

  it("exits 1 with the reason, printing no variables, when Redis refuses the password or is unreachable", async () => {
    const wrong = await startCli(["--redis", `redis://:nope@127.0.0.1:${redis.port}`]);
    expect(await wrong.exited).toBe(1);
    expect(wrong.stdout).toBe("");
    expect(wrong.stderr).toMatch(/cannot use Redis at redis:\/\/:\*\*\*@127\.0\.0\.1:\d+: WRONGPASS/);

    const closed = await freePort();
    const unreachable = await startCli(["--redis", `redis://127.0.0.1:${closed}`]);
    expect(await unreachable.exited).toBe(1);
    expect(unreachable.stdout).toBe("");
    expect(unreachable.stderr).toContain(`cannot use Redis at redis://127.0.0.1:${closed}: connect ECONNREFUSED`);
  });

  it("exits 2 with the usage on a bad command line", async () => {
    for (
      const [args, message] of [
        [["--bogus"], "Unknown option '--bogus'"],
        [["--port", "http"], '--port must be a whole number from 0 to 65535, got "http".'],
        [["--redis", "rediss://example.com"], "TLS, rediss://, is not supported"],
        [["--cors-origin", "http://127.0.0.1:8080/path"], "--cors-origin must be an origin"],
      ] as const
    ) {
      const cli = await startCli([...args]);
      expect(await cli.exited, args.join(" ")).toBe(2);
      expect(cli.stderr).toContain(message);
      expect(cli.stderr).toContain("Usage: upstash-local [options]");
      expect(cli.stdout).toBe("");
    }
  });
});
