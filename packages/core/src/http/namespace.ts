import { FloodgateError } from "../errors.ts";
import type { Policy } from "../policy.ts";
import { sha256Hex } from "../sha256.ts";
import type { RateLimitStore } from "../stores/store.ts";
import { WHERE } from "./options.ts";

// Namespaces of the middlewares' limiters. Without a `prefix`, a limiter's namespace depends on
// its policy set, so middlewares with different policies on one store never read each other's
// counters, while the same configuration in any number of processes shares them.

/** What a policy set's state means: each policy's kind and figures, in order (names only label them). */
export function policySignature(policies: readonly Policy[]): string {
  // A block is part of what the state means; without one the signature is what it always was.
  return policies.map((p) =>
    `${p.kind}/${p.limit}/${p.windowMs}/${p.refillRate}/${p.intervalMs}${p.blockMs > 0 ? `/b${p.blockMs}` : ""}${calendarOf(p)}`
  )
    .join(",");
}

/** A calendar window's calendar, part of what its state means; nothing for the other kinds. */
const calendarOf = (p: Policy): string => {
  const c = p.calendar;
  return c === undefined ? "" : `/${c.period}/${c.timeZone}/${c.period === "month" ? c.billingDay : c.period === "week" ? c.weekStart : 0}`;
};

/**
 * Six base-36 characters (31 bits of the signature's SHA-256): the part of a default namespace
 * that names the policy set. Short because it is in every Redis key; two different sets in one
 * process are told apart exactly by {@link claimNamespace} whatever their fingerprints.
 */
export function policyFingerprint(policies: readonly Policy[]): string {
  return shortHash(policySignature(policies));
}

/** Six base-36 characters: 31 bits of the SHA-256 of `text` (UTF-8). */
function shortHash(text: string): string {
  const digest = sha256Hex(new TextEncoder().encode(text));
  return (Number.parseInt(digest.slice(0, 8), 16) >>> 1).toString(36).padStart(6, "0");
}

/**
 * How a rule's pattern appears in its namespace: its letters and digits in lower case, runs of
 * anything else as one `-`, at most 40 characters, then `-` and a hash of the pattern as written
 * (which tells apart patterns that read alike, `GET /a/b` and `GET /a-b`, or differ in case).
 * Nothing in it needs quoting in redis-cli: `"POST /api/login"` becomes `post-api-login-1x2y3z`.
 */
export function ruleSlug(pattern: string): string {
  const words = pattern.toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-+|-+$/g, "").slice(0, 40).replace(/-+$/, "");
  return `${words === "" ? "rule" : words}-${shortHash(pattern)}`;
}

/** Every namespace a middleware counts in, by store: the signature of the policies counting there. */
const claims = new WeakMap<RateLimitStore, Map<string, string>>();

/**
 * Records that `policies` count under `prefix` in `store`; throws when other policies already do,
 * since they would read and overwrite each other's state.
 */
export function claimNamespace(store: RateLimitStore, prefix: string, policies: readonly Policy[]): void {
  let byPrefix = claims.get(store);
  if (byPrefix === undefined) claims.set(store, byPrefix = new Map());
  const signature = policySignature(policies);
  const claimed = byPrefix.get(prefix);
  if (claimed === undefined) byPrefix.set(prefix, signature);
  else if (claimed !== signature) {
    throw new FloodgateError(
      "INVALID_OPTION",
      `${WHERE}: the namespace ${
        JSON.stringify(prefix)
      } of this store already counts other policies (${claimed}; here ${signature}). Two limiters with different policies in one namespace would read and reset each other's counters: give this middleware (or rule) another \`prefix\`, leave \`prefix\` out to get a namespace of its own policies, or share one limiter.`,
    );
  }
}
