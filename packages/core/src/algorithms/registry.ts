import type { AlgorithmDefinition } from "./algorithm.ts";
import type { PolicyKind } from "../policy.ts";
import { CALENDAR_WINDOW_DEFINITION } from "./calendar-window.ts";
import { CONCURRENCY_DEFINITION } from "./concurrency.ts";
import { FIXED_WINDOW_DEFINITION } from "./fixed-window.ts";
import { SLIDING_LOG_DEFINITION } from "./sliding-log.ts";
import { SLIDING_WINDOW_DEFINITION } from "./sliding-window.ts";
import { TOKEN_BUCKET_DEFINITION } from "./token-bucket.ts";

/**
 * Every kind of policy, by kind. Adding one is a file in this folder and a line here (see
 * docs/adding-an-algorithm.md). The Redis scripts and their dispatch are assembled from this
 * list in this order; the memory store never reads it (a policy carries its own algorithm).
 */
export const ALGORITHMS = {
  /** See `tokenBucket()`. */
  "token-bucket": TOKEN_BUCKET_DEFINITION,
  /** See `fixedWindow()`. */
  "fixed-window": FIXED_WINDOW_DEFINITION,
  /** See `slidingWindow()`. */
  "sliding-window": SLIDING_WINDOW_DEFINITION,
  /** See `slidingLog()`. */
  "sliding-log": SLIDING_LOG_DEFINITION,
  /** See `concurrency()`. */
  concurrency: CONCURRENCY_DEFINITION,
  /** See `calendarWindow()`. */
  "calendar-window": CALENDAR_WINDOW_DEFINITION,
} as const satisfies { readonly [K in PolicyKind]: AlgorithmDefinition<K> };

export type { PolicyKind };

/** The kinds, in the registry's order. */
export const POLICY_KINDS = /* @__PURE__ */ Object.keys(ALGORITHMS) as PolicyKind[];
