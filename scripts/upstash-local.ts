/**
 * A local Upstash-compatible REST endpoint for development: `npm run upstash-local`.
 *
 * Starts a private redis-server (or uses REDIS_URL when set) and `@floodgate/upstash-local` in
 * front of it, prints the two variables `Redis.fromEnv()` reads, and runs until Ctrl-C, then
 * stops only what it started. (Against a redis-server of your own, the package's bin does the
 * same: `npx @floodgate/upstash-local --redis redis://127.0.0.1:6379`.)
 *
 * Environment:
 *   REDIS_URL                 redis://[user:password@]host:port[/db] or unix:///path/to.sock
 *   UPSTASH_LOCAL_PORT        HTTP port (default: a free one)
 *   UPSTASH_LOCAL_TOKEN       bearer token (default: random)
 */
import { parseRedisUrl, type RedisEndpoint, startUpstashBridge, type UpstashBridge } from "../packages/upstash-local/src/index.ts";
import { type RedisInstance, startRedis } from "../test/support/redis-server.ts";

async function main(): Promise<void> {
  let redis: RedisInstance | undefined;
  let bridge: UpstashBridge | undefined;
  let endpoint: RedisEndpoint;
  const redisUrl = process.env["REDIS_URL"];
  if (redisUrl !== undefined && redisUrl !== "") {
    endpoint = parseRedisUrl(redisUrl);
  } else {
    redis = await startRedis();
    endpoint = { host: redis.host, port: redis.port };
  }

  let stopping = false;
  const stop = async (exitCode: number): Promise<void> => {
    if (stopping) return;
    stopping = true;
    await bridge?.stop();
    await redis?.stop();
    process.exit(exitCode);
  };
  process.on("SIGINT", () => void stop(0));
  process.on("SIGTERM", () => void stop(0));

  try {
    const port = process.env["UPSTASH_LOCAL_PORT"];
    const token = process.env["UPSTASH_LOCAL_TOKEN"];
    bridge = await startUpstashBridge({
      redis: endpoint,
      ...(port !== undefined && port !== "" ? { port: Number(port) } : {}),
      ...(token !== undefined && token !== "" ? { token } : {}),
    });
  } catch (error) {
    console.error(error);
    await stop(1);
    return;
  }

  const behind = redis ? `private redis-server ${redis.url} (pid ${redis.pid})` : "REDIS_URL";
  console.log(`UPSTASH_REDIS_REST_URL=${bridge.url}`);
  console.log(`UPSTASH_REDIS_REST_TOKEN=${bridge.token}`);
  console.error(`# Upstash REST bridge in front of ${behind}; Ctrl-C to stop.`);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
