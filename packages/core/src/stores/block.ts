import { type Algorithm, FIELDS_PER_POLICY, NEVER } from "../algorithms/algorithm.ts";
import type { Policy } from "../policy.ts";

// Blocks and penalties as the TypeScript stores (memory, evaluateState) apply them; the Redis
// scripts mirror them (stores/redis/lua.ts).

/** The longest `block` among the policies that denied (0: none blocks). `out` is a store result's figures. */
export function blockFor(policies: readonly Policy[], out: readonly number[]): number {
  let ms = 0;
  for (let p = 0; p < policies.length; p++) {
    if (out[1 + p * FIELDS_PER_POLICY] === 0 && policies[p]!.blockMs > ms) ms = policies[p]!.blockMs;
  }
  return ms;
}

/**
 * Turns a result's figures into those of a key blocked until `untilUs`: denied, every policy with
 * 0 remaining, a reset and a wait that last at least until the block ends (a wait of "never", a
 * cost beyond the limit, stays so). No marks: nothing was charged.
 */
export function overrideBlocked(out: number[], count: number, untilUs: number, now: number): void {
  out.length = 1 + count * FIELDS_PER_POLICY;
  out[0] = 0;
  const endMs = Math.ceil(untilUs / 1000);
  const waitMs = Math.ceil((untilUs - now) / 1000);
  for (let p = 0; p < count; p++) {
    const i = 1 + p * FIELDS_PER_POLICY;
    out[i] = 0;
    out[i + 1] = 0;
    if (out[i + 2]! < endMs) out[i + 2] = endMs;
    if (out[i + 3] !== NEVER && out[i + 3]! < waitMs) out[i + 3] = waitMs;
  }
}

/**
 * Charges one policy's share of a penalty: what is left of it, up to `cost` (it saturates at full;
 * nothing beyond is carried). Returns the state's expiry in µs (0 when nothing was charged).
 * `out` is scratch room for one policy's figures.
 */
export function penalize(
  algorithm: Algorithm,
  policy: Policy,
  s: Float64Array,
  o: number,
  log: number[] | undefined,
  now: number,
  cost: number,
  out: number[],
): number {
  algorithm.apply(policy, s, o, log, now, 1, out, 1, false);
  const take = Math.min(cost, out[2]!);
  return take > 0 ? algorithm.apply(policy, s, o, log, now, take, out, 1, true) : 0;
}
