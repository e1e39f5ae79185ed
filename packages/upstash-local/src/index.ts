export {
  type BridgeCounters,
  type BridgeRequest,
  type PoolStats,
  type RedisEndpoint,
  startUpstashBridge,
  type UpstashBridge,
  type UpstashBridgeOptions,
} from "./upstash-bridge.ts";
export { parseRedisUrl } from "./redis-url.ts";
