import type { DimensionDecision } from "../../compound/types.ts";
import type { Decision } from "../../limiter/index.ts";
import type { Policy } from "../../policy.ts";
import { createHeaderWriter, HEADER_NAMES, type HeaderFormat, type HeaderWriter, secondsUntil } from "../headers.ts";
import { holdsInFlight } from "../in-flight.ts";

// The rate-limit headers of a rule with dimensions. The single-figure formats (legacy, draft-6,
// draft-7) describe the binding dimension, as its own rule's headers would. draft-11 lists every
// dimension as a named item of `RateLimit-Policy` and of `RateLimit`, as it lists every policy of
// a rule with several: a client reads each quota it is under, the tightest decides.

/** A dimension's name and policies, in the rule's order. */
export interface DimensionPolicies {
  readonly name: string;
  readonly policies: readonly Policy[];
}

/**
 * The header item name of a dimension's policy: the dimension's name when it has one policy,
 * else `dimension.policy` (every item of a header has a name of its own).
 */
export const itemName = (dimension: DimensionPolicies, policy: Policy): string =>
  dimension.policies.length === 1 ? dimension.name : `${dimension.name}.${policy.name}`;

/** The writer of a rule over `dims`, in `formats`; `undefined` when headers are off. */
export function compoundHeaderWriter(
  formats: readonly HeaderFormat[],
  dims: readonly DimensionPolicies[],
  legacyReset: "epoch" | "delta",
): HeaderWriter | undefined {
  if (formats.length === 0) return undefined;
  // Read here, not at the module's top level: an app that never calls this keeps nothing of it.
  const { rateLimit: RATE_LIMIT, rateLimitPolicy: RATE_LIMIT_POLICY, quota: Q, window: W, quotaUnit: QU, remaining: R, reset: T } =
    HEADER_NAMES;
  const single = formats.filter((f) => f !== "draft-11");
  // Per dimension, the writer its own rule would have, for the binding dimension's figures.
  const own = new Map(dims.map((d) => [d.name, createHeaderWriter(single, d.policies, legacyReset)]));
  const ietf = single.length !== formats.length;
  const items = dims.flatMap((d) =>
    d.policies.map((p) => ({ dimension: d.name, index: d.policies.indexOf(p), name: itemName(d, p), policy: p }))
  );
  const policyValue = items.map(({ name, policy }) =>
    holdsInFlight(policy)
      ? `"${name}";${Q}=${policy.limit};${QU}="concurrent-requests"`
      : `"${name}";${Q}=${policy.limit};${W}=${Math.max(1, Math.ceil(policy.windowMs / 1000))}`
  ).join(", ");
  return (decision: Decision, now: number): string[] => {
    const compound = decision as unknown as { dimension: string; dimensions: Readonly<Record<string, DimensionDecision>> };
    const binding = compound.dimensions[compound.dimension]!;
    const out = own.get(binding.dimension)?.(binding as unknown as Decision, now) ?? [];
    if (!ietf) return out;
    let value = "";
    for (const item of items) {
      const p = compound.dimensions[item.dimension]!.policies[item.index]!;
      // A denied policy's `t` is when it admits again, so Retry-After never points earlier than it.
      const t = p.retryAfterMs > 0 && p.retryAfterMs !== Infinity ? Math.ceil(p.retryAfterMs / 1000) : secondsUntil(p.resetAt, now);
      value += `${value === "" ? "" : ", "}"${item.name}";${R}=${p.remaining};${T}=${t}`;
    }
    out.push(RATE_LIMIT_POLICY, policyValue, RATE_LIMIT, value);
    return out;
  };
}
