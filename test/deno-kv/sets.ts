/** The exactness tests' policy sets: each rate kind at `limit` per hour, and all of them together. */
import { fixedWindow, type Policy, slidingLog, slidingWindow, tokenBucket } from "../../packages/core/src/index.ts";

export const SETS = ["token-bucket", "fixed-window", "sliding-window", "sliding-log", "multi"] as const;

export function policySet(set: string, limit: number): Policy[] {
  const window = "1h";
  switch (set) {
    case "token-bucket":
      return [tokenBucket({ capacity: limit, refillRate: limit / 3600 })];
    case "fixed-window":
      return [fixedWindow({ limit, window })];
    case "sliding-window":
      return [slidingWindow({ limit, window })];
    case "sliding-log":
      return [slidingLog({ limit, window })];
    case "multi":
      return [
        tokenBucket({ capacity: limit + 3, refillRate: (limit + 3) / 3600, name: "tb" }),
        fixedWindow({ limit, window, name: "fw" }),
        slidingWindow({ limit: limit + 1, window, name: "sw" }),
        slidingLog({ limit: limit + 2, window, name: "sl" }),
      ];
    default:
      throw new Error(`unknown set ${set}`);
  }
}
