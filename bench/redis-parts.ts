/**
 * `node --import tsx bench/redis.ts --instructions --parts`: what the pieces of a decision script
 * cost inside Redis, each alone in a script of one key and three ARGV (Floodgate's call shape),
 * counted as the scripts are (test/support/redis-callgrind.ts), minus the script that only
 * returns 1. Every key exists (a short integer string with a TTL), as in steady state.
 */
import type { CallgrindRedis } from "../test/support/redis-callgrind.ts";
import type { Core } from "./copies.ts";
import { COUNTED_IDS, COUNTING } from "./redis-subjects.ts";

const PARTS: [string, string][] = [
  ["the call: one key, three ARGV, `return 1`", `return 1`],
  ['`redis.call("TIME")` and `t[1] * 1000000 + t[2]`', `local t = redis.call("TIME") local now = t[1] * 1000000 + t[2] return 1`],
  ["`GET` of the key (present)", `redis.call("GET", KEYS[1]) return 1`],
  ['`GET` of `KEYS[1] .. ":b"` (absent), the concatenation included', `redis.call("GET", KEYS[1] .. ":b") return 1`],
  ['`KEYS[1] .. ":b"` alone', `local b = KEYS[1] .. ":b" return 1`],
  ['`MGET` of the key and `KEYS[1] .. ":b"`', `redis.call("MGET", KEYS[1], KEYS[1] .. ":b") return 1`],
  ['`INCRBY key "1048576"`', `redis.call("INCRBY", KEYS[1], "1048576") return 1`],
  ['`SET key v "KEEPTTL"`', `redis.call("SET", KEYS[1], "1234567", "KEEPTTL") return 1`],
  ['`SET key v "PX" ms`', `redis.call("SET", KEYS[1], "1234567", "PX", "3600000") return 1`],
  ['`fmt("%d", 1796120238007111)` (string.format)', `local x = string.format("%d", 1796120238007111) return 1`],
  [
    "`local floor, ceil, max, fmt = math.floor, …`",
    `local floor, ceil, max, fmt = math.floor, math.ceil, math.max, string.format return 1`,
  ],
  [
    "`string.match` of a sliding window's state (its three captures)",
    `local a, b, c = string.match("29935337:12345:67890", "^(-?%d+):(%d+):(%d+)$") return 1`,
  ],
  ['a step\'s answer: `v .. " " .. t1 .. " " .. t2`', `local x = "29935337:12345:67890" .. " " .. ARGV[2] .. " " .. ARGV[3] return 1`],
  ['`type(v) == "string"`', `local x = type(ARGV[3]) == "string" return 1`],
  ["`math.floor(x)`", `local x = math.floor(ARGV[1] + 0.5) return 1`],
  ["`x - x % 1` (the same floor)", `local x = ARGV[1] + 0.5 x = x - x % 1 return 1`],
  ["`ARGV[2] + 0` (a string to a number)", `local x = ARGV[2] + 0 return 1`],
  ["`tonumber(ARGV[2])`", `local x = tonumber(ARGV[2]) return 1`],
  ['`fmt("%d:%d:%d", …)` of three numbers', `local x = string.format("%d:%d:%d", 29935337, 12346, 67890) return 1`],
  ['`a .. ":" .. n .. ":" .. b`, `n` a number', `local n = 12346 local x = ARGV[2] .. ":" .. n .. ":" .. ARGV[3] return 1`],
  ["returning a five-number table instead of 1", `return {1, 1, 99999999, 1700003600000, 0}`],
  ["returning a two-number table instead of 1", `return {1, 99999999}`],
];

export async function parts(cg: CallgrindRedis): Promise<string> {
  const c = cg.client;
  for (const id of COUNTED_IDS) await c.set(`p:{${id}}`, "1234567", "PX", 3_600_000);
  const rows = ["| part | instructions inside Redis per call |", "|---|---|"];
  let base = 0;
  for (const [name, source] of PARTS) {
    const sha = (await c.script("LOAD", source)) as string;
    const { instructions } = await cg.count(
      (id) => c.evalsha(sha, 1, `p:{${id}}`, "1", "100000000", "3600000"),
      COUNTED_IDS,
      COUNTING.decisions,
      COUNTING.warmUp,
    );
    if (base === 0) base = instructions;
    rows.push(`| ${name} | ${(base === instructions ? instructions : instructions - base).toLocaleString("en-US")} |`);
  }
  return rows.join("\n");
}

/**
 * `--instructions --sliding-log`: one sliding-log decision that finds `n` entries aged out (a
 * key charged `n` units at once, one more unit half a window later, then a decision once the
 * first `n` have left the window), counted alone, for n = 3, 1,000 and 10,000: the instructions
 * and commands of that one call inside Redis.
 */
export async function slidingLogExpiry(cg: CallgrindRedis, core: Core): Promise<string> {
  const rows = ["| entries ageing out in the call | instructions inside Redis | Redis commands in the call |", "|---|---|---|"];
  for (const n of [3, 1_000, 10_000]) {
    const T = 1_700_000_000_000;
    let now = T;
    const limiter = core.createRateLimiter({
      policy: core.slidingLog({ limit: n + 10, window: "1s" }),
      store: core.redisStore({ client: cg.client, clock: "local", denyCache: false }),
      prefix: `sl${n}:`,
      clock: () => now,
      // Under valgrind, charging 10,000 entries at once takes seconds.
      resilience: false,
    });
    await limiter.limit("k", { cost: n });
    now = T + 500;
    await limiter.limit("k");
    now = T + 1_000;
    const { instructions, commands } = await cg.count(
      async () => {
        const d = await limiter.limit("k", { cost: 2 });
        if (!d.allowed || d.remaining !== n + 7) {
          throw new Error(`sliding log: expected an admission with ${n + 7} remaining, got ${JSON.stringify(d)}`);
        }
      },
      ["k"],
      1,
      0,
    );
    const list = Object.entries(commands).map(([cmd, calls]) => `${cmd} ${calls}`).join(", ");
    rows.push(`| ${n.toLocaleString("en-US")} | ${instructions.toLocaleString("en-US")} | ${list} |`);
  }
  return rows.join("\n");
}
