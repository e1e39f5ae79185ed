/*
 * What the first steps of the string-state kinds (token bucket, sliding window counter) share:
 * how a step opens (the cost, the clock) and how it answers. A step answers one string, the state
 * it read and the clock, "<state> <seconds> <microseconds>", which costs Redis less than an array
 * of numbers (no conversion of the state, one reply value); the store reads it back with
 * {@link readStep} and decides from it by the same double arithmetic as the script did.
 */

/**
 * The step's opening: \`now\` (µs) and, for the script of a charge of 1 on the server's clock
 * (\`one\`), nothing else; otherwise \`cost\` from ARGV[1], the step running only for a charge
 * (its block is closed by {@link closeStep}) on the clock in ARGV[4] when given. Sets \`t1\`, \`t2\`:
 * the clock's two parts as the answer carries them.
 */
export const openStep = (one: boolean): string =>
  one
    ? `local t = redis.call("TIME")
local t1, t2 = t[1], t[2]
local now = t1 * 1000000 + t2
`
    : `local cost = ARGV[1] + 0
if cost > 0 then
local t1, t2 = "0", ARGV[4]
if not t2 then local t = redis.call("TIME") t1, t2 = t[1], t[2] end
local now = t1 * 1000000 + t2
`;

/** Closes what {@link openStep} opened. */
export const closeStep = (one: boolean): string => one ? "" : "end\n";

/** The step's answer: the state string read, \`s\` ("" when absent), and the clock. */
export const answer = (s: string): string => `return ${s} .. " " .. t1 .. " " .. t2`;

/**
 * The state string and the clock (µs) of a step's answer; undefined for anything else (a usual
 * result's array, a reply no step sends).
 */
export function readStep(reply: unknown): { state: string; now: number } | undefined {
  if (typeof reply !== "string") return undefined;
  const b = reply.lastIndexOf(" ");
  const a = reply.lastIndexOf(" ", b - 1);
  if (a < 0) return undefined;
  const now = Number(reply.slice(a + 1, b)) * 1_000_000 + Number(reply.slice(b + 1));
  return Number.isSafeInteger(now) ? { state: reply.slice(0, a), now } : undefined;
}
