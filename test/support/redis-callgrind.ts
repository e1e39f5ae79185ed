/**
 * A private redis-server under valgrind's callgrind, counting machine instructions only inside
 * `evalShaCommand`: what one script call costs inside Redis, which no other load on the machine
 * can move (a count repeats within ≈ 0.2 % run to run). Used by `bench/redis.ts --instructions`
 * and by test/redis/script-instructions.test.ts, so both count the same way.
 *
 * The server is started on a free loopback port in its own temporary directory, persisting
 * nothing, and killed by its pid (also when the process exits).
 */
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { Redis as IORedis } from "ioredis";
import { freePort } from "./redis-server.ts";

/** Whether valgrind and callgrind_control are on PATH. */
export function callgrindAvailable(): boolean {
  try {
    execFileSync("valgrind", ["--version"], { stdio: "ignore" });
    execFileSync("callgrind_control", ["--version"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

/** What {@link CallgrindRedis.count} counted per call. */
export interface Counted {
  readonly instructions: number;
  /** Commands per call by name, e.g. `{ evalsha: 1, time: 1, mget: 1, incrby: 1 }`. */
  readonly commands: Readonly<Record<string, number>>;
}

export interface CallgrindRedis {
  /** An ioredis client of the server (database 0). */
  readonly client: IORedis;
  /**
   * A client of database `db` (1–15): give each counted subject its own, so the size of the
   * keyspace it runs in (and where its dictionaries are in their rehashing) is the same whatever
   * was counted before it; the counts then repeat within ≈ 0.5 %.
   */
  connect(db: number): Promise<IORedis>;
  /** The server's version (`redis_version`). */
  readonly version: string;
  /**
   * Instructions inside Redis per script call of `decide`: `warmUp` calls (the keys exist, as in
   * steady state), the counters zeroed, `n` calls, the dump's total divided by `n`; and the Redis
   * commands per call over those `n` (INFO commandstats, a script's own calls included; CONFIG,
   * INFO and SCRIPT left out). The calls cycle through `ids`.
   */
  count(decide: (id: string) => Promise<unknown>, ids: readonly string[], n: number, warmUp: number): Promise<Counted>;
  stop(): void;
}

export async function startCallgrindRedis(): Promise<CallgrindRedis> {
  const dir = mkdtempSync(path.join(os.tmpdir(), "floodgate-cg-redis-"));
  const port = await freePort();
  const child = spawn(
    "valgrind",
    [
      "--tool=callgrind",
      "--toggle-collect=evalShaCommand",
      `--callgrind-out-file=${path.join(dir, "cg.%p")}`,
      "redis-server",
      "--port",
      String(port),
      "--bind",
      "127.0.0.1",
      "--save",
      "",
      "--appendonly",
      "no",
      "--dir",
      dir,
    ],
    { stdio: "ignore" },
  );
  const pid = child.pid!;
  const kill = (): void => {
    if (child.exitCode === null && child.signalCode === null) process.kill(pid, "SIGKILL");
  };
  process.once("exit", kill);
  const client = new IORedis(port, "127.0.0.1", { retryStrategy: () => 200, maxRetriesPerRequest: null });
  client.on("error", () => undefined);
  await new Promise((resolve) => client.once("ready", resolve));
  const version = ((await client.info("server")) as string).match(/redis_version:(\S+)/)?.[1] ?? "unknown";
  let dumps = 0;
  const clients = [client];
  return {
    client,
    version,
    async connect(db) {
      const c = new IORedis(port, "127.0.0.1", { db, maxRetriesPerRequest: null });
      clients.push(c);
      await new Promise((resolve) => c.once("ready", resolve));
      return c;
    },
    async count(decide, ids, n, warmUp) {
      for (let i = 0; i < warmUp; i++) await decide(ids[i % ids.length]!);
      await client.config("RESETSTAT");
      execFileSync("callgrind_control", ["-z", String(pid)], { stdio: "ignore" });
      for (let i = 0; i < n; i++) await decide(ids[i % ids.length]!);
      const label = `subject${++dumps}`;
      execFileSync("callgrind_control", ["-d", label, String(pid)], { stdio: "ignore" });
      const dump = readdirSync(dir).map((f) => readFileSync(path.join(dir, f), "utf8")).find((t) =>
        t.includes(`\ndesc: Trigger: dump ${label}\n`)
      );
      const total = Number(dump?.match(/^summary: (\d+)$/m)?.[1]);
      if (!Number.isFinite(total)) throw new Error(`callgrind wrote no dump for ${label}`);
      const commands: Record<string, number> = {};
      for (const [, cmd, calls] of ((await client.info("commandstats")) as string).matchAll(/cmdstat_([a-z|]+):calls=(\d+)/g)) {
        if (cmd!.startsWith("config") || cmd === "info" || cmd!.startsWith("script")) continue;
        commands[cmd!] = Number(calls) / n;
      }
      return { instructions: Math.round(total / n), commands };
    },
    stop() {
      for (const c of clients) c.disconnect();
      kill();
      process.removeListener("exit", kill);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
