/**
 * The Floodgate decisions whose script calls are counted inside Redis, by `bench/redis.ts
 * --instructions` and by test/redis/script-instructions.test.ts (which holds them to the figures
 * recorded in bench/redis-instructions.json): every decision admitted, the server's clock.
 */
import type { Redis as IORedis } from "ioredis";
import type { Core } from "./copies.ts";

/**
 * How the counts are taken, the same in the bench and the test: `ids` identifiers, one warm-up
 * decision each (every counted call then finds its key, as in steady state), then `decisions`
 * counted calls cycling through them.
 */
export const COUNTING = { ids: 100, warmUp: 100, decisions: 300 } as const;

/** The identifiers the counted decisions cycle through. */
export const COUNTED_IDS: readonly string[] = Array.from({ length: COUNTING.ids }, (_, i) => `user:${i}`);

/** Where the recorded figures live (the test compares with them; the bench's `--record` writes them). */
export const RECORD_FILE = new URL("./redis-instructions.json", import.meta.url);

/** The recorded figures: per script, instructions inside Redis and Redis commands per call. */
export interface InstructionRecord {
  readonly redis: string;
  readonly counting: { readonly ids: number; readonly warmUp: number; readonly decisions: number };
  readonly scripts: Readonly<Record<string, { readonly instructions: number; readonly commands: Readonly<Record<string, number>> }>>;
}

/** The scripts counted, by the names bench/redis-instructions.json records them under. */
export const SUBJECT_NAMES = [
  "floodgate fixed window",
  "floodgate token bucket",
  "floodgate sliding window",
  "floodgate sliding log",
  "floodgate token bucket + sliding window (multi)",
] as const;

/** The database of the first subject (each has its own: see `connect` in test/support/redis-callgrind.ts). */
export const FIRST_DB = 2;

/**
 * [name, decide] per script, in the order of {@link SUBJECT_NAMES}: subject i on `clients[i]`
 * (a client of database FIRST_DB + i), its keys `i<i>:{user:N}`.
 */
export function instructionSubjects(core: Core, clients: readonly IORedis[]): [string, (id: string) => Promise<unknown>][] {
  const { createRateLimiter, fixedWindow, slidingLog, slidingWindow, tokenBucket } = core;
  const hour = { window: "1h" } as const;
  let n = 0;
  const limiter = (policy: Parameters<Core["createRateLimiter"]>[0]["policy"]) => {
    const l = createRateLimiter({ policy, store: core.redisStore({ client: clients[n]! }), prefix: `i${n++}:` });
    return (id: string) => l.limit(id);
  };
  return [
    ["floodgate fixed window", limiter(fixedWindow({ limit: 100_000_000, ...hour }))],
    ["floodgate token bucket", limiter(tokenBucket({ capacity: 100_000_000, refillRate: 100_000_000 / 3600 }))],
    ["floodgate sliding window", limiter(slidingWindow({ limit: 100_000_000, ...hour }))],
    ["floodgate sliding log", limiter(slidingLog({ limit: 100_000, ...hour }))],
    [
      "floodgate token bucket + sliding window (multi)",
      limiter([
        tokenBucket({ capacity: 100_000_000, refillRate: 100_000_000 / 3600, name: "a" }),
        slidingWindow({ limit: 100_000_000, ...hour, name: "b" }),
      ]),
    ],
  ];
}
