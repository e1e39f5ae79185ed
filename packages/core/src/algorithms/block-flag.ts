/*
 * The block flag of the token bucket's and the sliding window counter's Redis state. A block of
 * the key adds 2^52 to one number of its state (the bucket's stored value goes 2^52 lower, the
 * sliding window's current count 2^52 higher; see each kind's `blockMark`), so that the
 * single-policy script's first step reads the block key only when the state it already read is
 * flagged: an unblocked key costs no command more. An older instance that does not know the flag
 * reads a flagged state as far over its limit and denies: it never admits more for it.
 *
 * The flag is part of the state: every script that rewrites a flagged state keeps the flag and
 * keeps its expiry at least as late as it was (a block marks the state to live until the block
 * ends). So while a block lasts, its key's state is there and flagged, and the first step may take
 * a missing state as a new, unblocked key. Only the first step clears a flag: when it finds the
 * block over, it removes the flag and decides as usual. (A state evicted under memory pressure
 * loses its block with its counts, as any state does.)
 */

/** The flag, 2^52. */
export const FLAG_VALUE = 4_503_599_627_370_496;

/** The flag as the scripts write it. */
export const FLAG = "4503599627370496";

/** Whether the block of \`KEYS[1]\` is over (its block key holds the end, µs), at \`now\`. */
export const BLOCK_OVER = `not ((tonumber(redis.call("GET", KEYS[1] .. ":b")) or 0) > now)`;

/**
 * The expiry in ms of a rewrite of the state \`k\` that was read flagged: \`ms\`, or the state's
 * current expiry when later (a flagged state lives until its block ends).
 */
export const keptExpiry = (ms: string): string => `max(${ms}, redis.call("PTTL", k))`;

/** The expiry in ms of a state \`k\` a block until \`bu\` (µs, \`now\` the clock) flags. */
export const BLOCK_EXPIRY = /* @__PURE__ */ keptExpiry("ceil((bu - now) / 1000)");
