export {
  startUpstashBridge,
  type BridgeCounters,
  type BridgeRequest,
  type PoolStats,
  type RedisEndpoint,
  type UpstashBridge,
  type UpstashBridgeOptions,
} from "./upstash-bridge.ts";
export { parseRedisUrl } from "./redis-url.ts";
