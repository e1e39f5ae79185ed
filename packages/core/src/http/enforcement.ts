import { FloodgateError } from "../errors.ts";
import { WHERE } from "./options.ts";
import type { RolloutOptions } from "./rollout-options.ts";

// Shadow mode and gradual enforcement of a rule: whether a request's decision is enforced, from
// the rule's (else the middleware's) `shadow` and `enforce` options. A client is in the enforced
// fraction by a stable hash of its key: the same key is always in or out at a given fraction,
// and one in at 1% is in at 5% (the fraction is a threshold on the hash).

/** The rollout options, as a rule or the middleware gives them. */
type Rollout = Pick<RolloutOptions, "shadow" | "enforce">;

/** Whether the request of `key` is enforced; `undefined` when every request is (nothing to compute). */
export type Enforcement = ((key: string) => boolean) | undefined;

const NEVER = (): boolean => false;

/** The fraction a rule is enforced for: its own options, else the middleware's; `where` names them in errors. */
function fractionOf(own: Rollout, where: string): number | undefined {
  if (own.shadow === true && own.enforce !== undefined) {
    throw new FloodgateError(
      "INVALID_OPTION",
      `${WHERE}: ${where}: \`shadow: true\` and \`enforce\` both given; use \`shadow: true\` (enforce for none) or \`enforce\` (a fraction from 0 to 1), not both.`,
    );
  }
  return own.shadow === true ? 0 : own.enforce ?? (own.shadow === false ? 1 : undefined);
}

/** How a rule's requests are enforced: the rule's `shadow`/`enforce`, else the middleware's. */
export function enforcementOf(rule: Rollout, middleware: Rollout, name: string): Enforcement {
  const fraction = fractionOf(rule, `rule ${JSON.stringify(name)}`) ?? fractionOf(middleware, "options") ?? 1;
  if (fraction >= 1) return undefined;
  if (fraction <= 0) return NEVER;
  const bound = fraction * 4_294_967_296;
  return (key) => keyHash(key) < bound;
}

/** A key's 32-bit hash, as an unsigned integer: FNV-1a over its UTF-16 units, then murmur3's finalizer (so that near keys, IPs, spread). */
export function keyHash(key: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}
