#!/usr/bin/env node
/**
 * `upstash-local`: an Upstash-compatible REST endpoint in front of a redis-server, until Ctrl-C.
 * Prints the two variables `Redis.fromEnv()` reads on stdout (so `> .env.local` works) and
 * everything else on stderr.
 */
import { parseArgs } from "node:util";
import { connectResp, type RespArg, RespError } from "./resp.ts";
import { parseRedisUrl } from "./redis-url.ts";
import { type RedisEndpoint, startUpstashBridge, type UpstashBridge } from "./upstash-bridge.ts";

const USAGE = `Usage: upstash-local [options]

An Upstash-compatible Redis REST server in front of your own redis-server, for local
development and CI. Point @upstash/redis at the URL and token it prints.

Options:
  --redis URL          redis://[user:password@]host[:port][/db] or unix:///path/to.sock
                       (default: $REDIS_URL, else redis://127.0.0.1:6379)
  --port N             HTTP port (default: a free one, printed)
  --host ADDRESS       interface to listen on (default: 127.0.0.1)
  --token TOKEN        bearer token clients must send (default: random, printed)
  --cors-origin ORIGIN answer CORS requests from this one origin, for a client in a browser page
  -h, --help           show this help
`;

/** A mistake in the command line: reported with the usage, exit code 2. */
class UsageError extends Error {}

interface CliOptions {
  redis: RedisEndpoint;
  redisUrl: string;
  port: number;
  host: string;
  token?: string;
  corsOrigin?: string;
}

function parseCommandLine(argv: string[]): CliOptions | "help" {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: {
        redis: { type: "string" },
        port: { type: "string" },
        host: { type: "string" },
        token: { type: "string" },
        "cors-origin": { type: "string" },
        help: { type: "boolean", short: "h" },
      },
    });
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  const values = parsed.values;
  if (values.help === true) return "help";
  const redisUrl = values.redis ?? (process.env["REDIS_URL"] || "redis://127.0.0.1:6379");
  let redis: RedisEndpoint;
  try {
    redis = parseRedisUrl(redisUrl);
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  const port = values.port === undefined ? 0 : Number(values.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new UsageError(`--port must be a whole number from 0 to 65535, got "${values.port}".`);
  }
  if (values.token !== undefined && values.token === "") throw new UsageError("--token must not be empty.");
  if (values["cors-origin"] !== undefined && !/^https?:\/\/[^/]+$/.test(values["cors-origin"])) {
    throw new UsageError(
      `--cors-origin must be an origin such as http://127.0.0.1:8080 (scheme, host, optional port, no path), got "${
        values["cors-origin"]
      }".`,
    );
  }
  return {
    redis,
    redisUrl,
    port,
    host: values.host ?? "127.0.0.1",
    ...(values.token !== undefined ? { token: values.token } : {}),
    ...(values["cors-origin"] !== undefined ? { corsOrigin: values["cors-origin"] } : {}),
  };
}

/** Fails early, with the reason, when Redis is unreachable or refuses the credentials. */
async function checkRedis(endpoint: RedisEndpoint): Promise<void> {
  const target = "socket" in endpoint ? { path: endpoint.socket } : { host: endpoint.host, port: endpoint.port };
  const conn = await connectResp(target, { connectTimeoutMs: 3000 });
  try {
    const commands: RespArg[][] = [];
    if (endpoint.password !== undefined) {
      commands.push(endpoint.username !== undefined ? ["AUTH", endpoint.username, endpoint.password] : ["AUTH", endpoint.password]);
    }
    if (endpoint.db !== undefined && endpoint.db !== 0) commands.push(["SELECT", endpoint.db]);
    commands.push(["PING"]);
    const failed = (await conn.pipeline(commands)).find((reply) => reply instanceof RespError);
    if (failed instanceof RespError) throw new Error(failed.message);
  } finally {
    conn.destroy();
  }
}

/** Hides the password when echoing the Redis URL. */
function redacted(url: string): string {
  return url.replace(/^(redis:\/\/[^:@/]*:)[^@/]*@/, "$1***@");
}

async function main(): Promise<number | undefined> {
  let options: CliOptions | "help";
  try {
    options = parseCommandLine(process.argv.slice(2));
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    process.stderr.write(`upstash-local: ${error.message}\n\n${USAGE}`);
    return 2;
  }
  if (options === "help") {
    process.stdout.write(USAGE);
    return 0;
  }

  try {
    await checkRedis(options.redis);
  } catch (error) {
    process.stderr.write(`upstash-local: cannot use Redis at ${redacted(options.redisUrl)}: ${(error as Error).message}\n`);
    return 1;
  }

  let bridge: UpstashBridge;
  try {
    bridge = await startUpstashBridge({
      redis: options.redis,
      host: options.host,
      port: options.port,
      ...(options.token !== undefined ? { token: options.token } : {}),
      ...(options.corsOrigin !== undefined ? { corsOrigin: options.corsOrigin } : {}),
    });
  } catch (error) {
    process.stderr.write(`upstash-local: cannot listen on ${options.host}:${options.port}: ${(error as Error).message}\n`);
    return 1;
  }

  let stopping = false;
  const stop = (): void => {
    if (stopping) return;
    stopping = true;
    bridge.stop().then(
      () => process.exit(0),
      (error: unknown) => {
        process.stderr.write(`upstash-local: error while stopping: ${(error as Error).message}\n`);
        process.exit(1);
      },
    );
  };
  process.on("SIGINT", stop);
  process.on("SIGTERM", stop);

  process.stdout.write(`UPSTASH_REDIS_REST_URL=${bridge.url}\nUPSTASH_REDIS_REST_TOKEN=${bridge.token}\n`);
  process.stderr.write(`# Upstash REST server in front of ${redacted(options.redisUrl)}; Ctrl-C to stop.\n`);
  return undefined;
}

main().then(
  (code) => {
    if (code !== undefined) process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`upstash-local: ${(error as Error).stack ?? String(error)}\n`);
    process.exitCode = 1;
  },
);
