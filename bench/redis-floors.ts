/**
 * `node --import tsx bench/redis.ts --instructions --floors`: the least any script can cost inside
 * Redis for a decision on the server's clock, beside rate-limiter-flexible's fixed window, all on
 * one server in one run. Each floor is a whole script doing only the commands such a decision
 * cannot do without, with no arithmetic and no decision logic:
 *  - the clock (`TIME`), because decisions are made on the server's clock;
 *  - one read before the write, because a denial must charge nothing (or, for a counter, the
 *    write's own answer, a denial then writing twice: the charge and its undoing);
 *  - one write: `INCRBY` for a counter that is only incremented (a fixed window within its
 *    window), `SET … PX` for a state rewritten with its expiry (token bucket, sliding window);
 *  - a reply carrying the count and the server's time (without the time, a caller cannot say
 *    when to retry on the server's clock): two numbers, or the state string written, when that
 *    string already holds both.
 * One key and two ARGV (a cost and a limit: the fewest a policy can be passed in), every key
 * present, as in steady state; counted as the decision scripts are (test/support/redis-callgrind.ts).
 */
import { RateLimiterRedis } from "rate-limiter-flexible";
import type { CallgrindRedis } from "../test/support/redis-callgrind.ts";
import { COUNTED_IDS, COUNTING } from "./redis-subjects.ts";

const CLOCK = `local t = redis.call("TIME") local now = t[1] * 1000000 + t[2]\n`;

const CLOCK_PARTS = `local t = redis.call("TIME") local t1, t2 = t[1], t[2] local now = t1 * 1000000 + t2\n`;

/** Each floor: its name, its script, and the prefix of its keys ("f": present, "s": a sliding window's state, "n": none). */
const FLOORS: [string, string, string?][] = [
  ["the call alone: one key, two ARGV, `return 1`", `return 1`],
  [
    "`TIME`, `GET`, `INCRBY`, reply: the state read (one value, no time)",
    `${CLOCK}local v = redis.call("GET", KEYS[1]) redis.call("INCRBY", KEYS[1], "1048576") return v`,
  ],
  [
    "`TIME`, `GET`, `INCRBY`, reply: the count and the time",
    `${CLOCK}local v = redis.call("GET", KEYS[1]) redis.call("INCRBY", KEYS[1], "1048576") return {tonumber(v), now}`,
  ],
  [
    "the same and `GET` of the block key",
    `${CLOCK}local v = redis.call("GET", KEYS[1]) local b = redis.call("GET", KEYS[1] .. ":b") redis.call("INCRBY", KEYS[1], "1048576") return {tonumber(v), now}`,
  ],
  [
    "`TIME`, `INCRBY` (its answer read, no `GET`), reply: the count and the time (the fixed window's floor)",
    `${CLOCK}local v = redis.call("INCRBY", KEYS[1], "1048576") return {v, now}`,
  ],
  [
    "`TIME`, `GET`, `SET … PX`, reply: the count and the time",
    `${CLOCK}local v = redis.call("GET", KEYS[1]) redis.call("SET", KEYS[1], "1234567", "PX", "3600000") return {tonumber(v), now}`,
  ],
  [
    "`TIME`, `GET`, `SET … PX`, reply: the string written (token bucket's and sliding window's floor)",
    `${CLOCK}local v = redis.call("GET", KEYS[1]) local s = "1234567" redis.call("SET", KEYS[1], s, "PX", "3600000") return s`,
  ],
  [
    "the same and `GET` of the block key",
    `${CLOCK}local v = redis.call("GET", KEYS[1]) local b = redis.call("GET", KEYS[1] .. ":b") local s = "1234567" redis.call("SET", KEYS[1], s, "PX", "3600000") return s`,
  ],
  [
    "`TIME`, `GET` (no value: a new or full bucket), `SET … PX` of one number formatted from the clock (the expiry passed in), reply: the clock as two strings (a token bucket's least)",
    `${CLOCK_PARTS}local v = redis.call("GET", KEYS[1]) redis.call("SET", KEYS[1], string.format("%d", -now - 36), "PX", ARGV[2]) return t1 .. " " .. t2`,
    "n",
  ],
  [
    "`TIME`, `GET`, its three numbers read (`string.match`), `SET … KEEPTTL` of them formatted, reply: the state read and the clock (a sliding window's least)",
    `${CLOCK_PARTS}local v = redis.call("GET", KEYS[1]) local si, sc, sp = string.match(v, "^(-?%d+):(%d+):(%d+)$") redis.call("SET", KEYS[1], string.format("%d:%d:%d", si, sc + 1, sp), "KEEPTTL") return v .. " " .. t1 .. " " .. t2`,
    "s",
  ],
];

export async function floors(cg: CallgrindRedis): Promise<string> {
  const c = await cg.connect(14);
  for (const id of COUNTED_IDS) await c.set(`f:{${id}}`, "1234567", "PX", 3_600_000);
  for (const id of COUNTED_IDS) await c.set(`s:{${id}}`, "29935337:2:0", "PX", 3_600_000);
  const rlf = new RateLimiterRedis({ storeClient: await cg.connect(15), points: 100_000_000, duration: 3600, keyPrefix: "f" });
  const peer = await cg.count((id) => rlf.consume(id), COUNTED_IDS, COUNTING.decisions, COUNTING.warmUp);
  const rows = [
    "| script | instructions inside Redis per call | ÷ rate-limiter-flexible | Redis commands per call |",
    "|---|---|---|---|",
  ];
  const row = (name: string, { instructions, commands }: { instructions: number; commands: Readonly<Record<string, number>> }) =>
    rows.push(
      `| ${name} | ${instructions.toLocaleString("en-US")} | ${(instructions / peer.instructions).toFixed(2)} | ${
        Object.entries(commands).map(([cmd, calls]) => `${cmd} ${+calls.toFixed(3)}`).join(", ")
      } |`,
    );
  row("rate-limiter-flexible `RateLimiterRedis` (fixed window, the app's clock)", peer);
  for (const [name, source, prefix = "f"] of FLOORS) {
    const sha = (await c.script("LOAD", source)) as string;
    // Two ARGV: a cost and a limit, or (the bucket's floor, whose keys expire between visits) an expiry of 1 ms.
    const argv = prefix === "n" ? ["1", "1"] : ["1", "100000000"];
    row(name, await cg.count((id) => c.evalsha(sha, 1, `${prefix}:{${id}}`, ...argv), COUNTED_IDS, COUNTING.decisions, COUNTING.warmUp));
  }
  return rows.join("\n");
}
