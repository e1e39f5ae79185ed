import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import net from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Cluster } from "ioredis";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { freePort, REDIS_SERVER_MISSING, type RedisCluster, startRedis, startRedisCluster } from "../support/redis-server.ts";
import { connectResp, replyToText, type RespTarget } from "../../packages/upstash-local/src/resp.ts";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function ask(target: RespTarget, ...args: string[]): Promise<unknown> {
  const client = await connectResp(target);
  try {
    return replyToText(await client.send(args));
  } finally {
    client.destroy();
  }
}

function refusesConnections(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: "127.0.0.1", port });
    socket.once("connect", () => {
      socket.destroy();
      resolve(false);
    });
    socket.once("error", () => resolve(true));
  });
}

describe("startRedis", () => {
  it("starts a private, non-persistent server on a free loopback port and stops it by pid", async () => {
    const redis = await startRedis();
    expect(redis.port).toBeGreaterThan(0);
    expect(redis.port).not.toBe(6379);
    expect(redis.url).toBe(`redis://127.0.0.1:${redis.port}`);
    expect(isAlive(redis.pid)).toBe(true);
    expect(await ask(redis.target, "PING")).toBe("PONG");
    expect(await ask(redis.target, "CONFIG", "GET", "save")).toEqual(["save", ""]);
    expect(await ask(redis.target, "CONFIG", "GET", "appendonly")).toEqual(["appendonly", "no"]);
    expect(await ask(redis.target, "CONFIG", "GET", "dir")).toEqual(["dir", redis.dir]);
    const info = String(await ask(redis.target, "INFO", "server"));
    expect(info).toContain(`process_id:${redis.pid}`);

    await redis.stop();
    expect(redis.running).toBe(false);
    expect(isAlive(redis.pid)).toBe(false);
    expect(existsSync(redis.dir)).toBe(false);
    expect(await refusesConnections(redis.port)).toBe(true);
    await redis.stop(); // idempotent
  });

  it("gives concurrent servers distinct ports", async () => {
    const servers = await Promise.all([startRedis(), startRedis(), startRedis()]);
    try {
      expect(new Set(servers.map((s) => s.port)).size).toBe(3);
      for (const s of servers) expect(await ask(s.target, "PING")).toBe("PONG");
    } finally {
      await Promise.all(servers.map((s) => s.stop()));
    }
  });

  it("listens on a unix socket only, with --port 0", async () => {
    const redis = await startRedis({ unixSocket: true });
    try {
      expect(redis.socket).toBeDefined();
      expect(existsSync(redis.socket as string)).toBe(true);
      expect(redis.url).toBe(`unix://${redis.socket}`);
      expect(redis.target).toEqual({ path: redis.socket });
      expect(await ask(redis.target, "CONFIG", "GET", "port")).toEqual(["port", "0"]);
    } finally {
      await redis.stop();
    }
  });

  it("honours a fixed port and extra args", async () => {
    const port = await freePort();
    const redis = await startRedis({ port, args: ["--maxmemory", "7mb"] });
    try {
      expect(redis.port).toBe(port);
      expect(await ask(redis.target, "CONFIG", "GET", "maxmemory")).toEqual(["maxmemory", String(7 * 1024 * 1024)]);
    } finally {
      await redis.stop();
    }
  });

  it("fails clearly when a fixed port is taken", async () => {
    // Accepts and drops connections, so startRedis cannot mistake it for its server.
    const blocker = net.createServer((socket) => socket.destroy());
    await new Promise<void>((resolve) => blocker.listen(0, "127.0.0.1", resolve));
    const port = (blocker.address() as net.AddressInfo).port;
    try {
      await expect(startRedis({ port })).rejects.toThrow(/address already in use/i);
    } finally {
      await new Promise((resolve) => blocker.close(resolve));
    }
  });

  it("reports redis-server's own complaint when it refuses its arguments", async () => {
    await expect(startRedis({ args: ["--no-such-directive", "x"] })).rejects.toThrow(/Bad directive/);
  });

  it("restarts on the same port with a new pid and no data", async () => {
    const redis = await startRedis();
    try {
      await ask(redis.target, "SET", "k", "v");
      const firstPid = redis.pid;
      await redis.restart();
      expect(redis.pid).not.toBe(firstPid);
      expect(isAlive(firstPid)).toBe(false);
      expect(await ask(redis.target, "GET", "k")).toBeNull();
      expect(await ask(redis.target, "PING")).toBe("PONG");
    } finally {
      await redis.stop();
    }
  });

  it("kill() signals the process and exited() resolves; a killed server can be restarted", async () => {
    const redis = await startRedis({ unixSocket: true });
    try {
      const pid = redis.pid;
      redis.kill();
      await redis.exited();
      expect(redis.running).toBe(false);
      expect(isAlive(pid)).toBe(false);
      await redis.restart();
      expect(await ask(redis.target, "PING")).toBe("PONG");
    } finally {
      await redis.stop();
    }
  });

  it("stops a SIGSTOPped server too", async () => {
    const redis = await startRedis();
    const pid = redis.pid;
    redis.kill("SIGSTOP");
    await redis.stop();
    expect(isAlive(pid)).toBe(false);
  });

  it("refuses to run without redis-server and says how to install it", async () => {
    const savedPath = process.env["PATH"];
    process.env["PATH"] = "/nonexistent-floodgate-path";
    try {
      await expect(startRedis()).rejects.toThrow(REDIS_SERVER_MISSING);
    } finally {
      process.env["PATH"] = savedPath;
    }
    expect(REDIS_SERVER_MISSING).toContain("redis-server is required");
    expect(REDIS_SERVER_MISSING).toContain("apt-get install -y redis-server");
  });

  it.each(["SIGKILL", "SIGTERM"] as const)(
    "leaves no orphan server when the test process dies by %s",
    async (signal) => {
      const script = [
        `const { startRedis } = await import(${JSON.stringify(path.join(ROOT, "test/support/redis-server.ts"))});`,
        "const redis = await startRedis();",
        "console.log(redis.pid);",
        "setInterval(() => {}, 1000);",
      ].join("\n");
      const child = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
        cwd: ROOT,
        stdio: ["ignore", "pipe", "pipe"],
      });
      const redisPid = await new Promise<number>((resolve, reject) => {
        let out = "";
        let err = "";
        child.stdout.on("data", (chunk: Buffer) => {
          out += chunk.toString();
          const line = out.split("\n")[0];
          if (out.includes("\n") && line !== undefined) resolve(Number(line));
        });
        child.stderr.on("data", (chunk: Buffer) => (err += chunk.toString()));
        child.once("exit", (code) => reject(new Error(`child exited early (${code}): ${err}`)));
      });
      expect(isAlive(redisPid)).toBe(true);
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill(signal);
      await exited;
      await vi.waitFor(() => expect(isAlive(redisPid)).toBe(false), { timeout: 5000, interval: 20 });
    },
    20_000,
  );
});

describe("startRedisCluster", () => {
  let cluster: RedisCluster;

  beforeAll(async () => {
    cluster = await startRedisCluster();
  }, 60_000);

  afterAll(async () => {
    await cluster?.stop();
  });

  it("forms a 3-master cluster on loopback with every slot served", async () => {
    expect(cluster.nodes).toHaveLength(3);
    expect(cluster.startupNodes).toEqual(cluster.nodes.map((n) => ({ host: "127.0.0.1", port: n.port })));
    for (const node of cluster.nodes) {
      const info = String(await ask(node.target, "CLUSTER", "INFO"));
      expect(info).toContain("cluster_state:ok");
      expect(info).toContain("cluster_slots_assigned:16384");
      expect(info).toContain("cluster_size:3");
    }
  });

  it("serves ioredis Cluster: keys spread over all masters, hash-tagged scripts run", async () => {
    const client = new Cluster(cluster.startupNodes, { lazyConnect: true });
    try {
      await client.connect();
      await Promise.all(Array.from({ length: 60 }, (_, i) => client.set(`k${i}`, `v${i}`)));
      expect(await Promise.all(Array.from({ length: 60 }, (_, i) => client.get(`k${i}`)))).toEqual(
        Array.from({ length: 60 }, (_, i) => `v${i}`),
      );
      const perNode = await Promise.all(cluster.nodes.map((n) => ask(n.target, "DBSIZE")));
      for (const size of perNode) expect(size).toBeGreaterThan(0);
      expect((perNode as number[]).reduce((a, b) => a + b, 0)).toBe(60);
      const sum = await client.eval(
        "redis.call('set', KEYS[1], ARGV[1]); return redis.call('incrby', KEYS[2], ARGV[1])",
        2,
        "{user:1}:a",
        "{user:1}:b",
        "5",
      );
      expect(sum).toBe(5);
    } finally {
      client.disconnect();
    }
  });

  it("stop() ends every node", async () => {
    const other = await startRedisCluster();
    const pids = other.nodes.map((n) => n.pid);
    await other.stop();
    for (const pid of pids) expect(isAlive(pid)).toBe(false);
  }, 60_000);
});
