import { describeValue, FloodgateError } from "../../errors.ts";
import { isPolicies, POLICIES_ACCEPTED, type Policy } from "../../policies.ts";
import { policySignature } from "../namespace.ts";
import { WHERE } from "../options.ts";
import { MAX_POLICY_SETS, NEW_POLICIES_THRESHOLD } from "../rules.ts";
import type { Warnings } from "../warnings.ts";

// A dimension whose `policy` is a function of the request: what it made of each distinct policy
// set the function returned, as a rule with a `policy` function keeps its limiters (rules.ts):
// by the identity of what was returned, else by what the set means; at most MAX_POLICY_SETS,
// the least recently used out first.

/** Every policy object a dimension's `policy` function has returned: a new one with known figures is one built per request. */
const policiesSeen = new WeakSet<Policy>();

/**
 * What `make` built of the policy set `returned` (validated here: an INVALID_ARGUMENT error names
 * the dimension and what it returned), made on first use and kept.
 */
export function policySets<T>(
  rule: string,
  dimension: string,
  make: (policies: readonly Policy[]) => T,
  warnings: Warnings,
): (returned: unknown) => T {
  const where = `dimension "${dimension}"${rule === "default" ? "" : ` of rule ${JSON.stringify(rule)}`}`;
  const byValue = new WeakMap<object, T>();
  const bySet = new Map<string, T>();
  let rebuilt = 0;
  return (returned) => {
    const known = typeof returned === "object" && returned !== null ? byValue.get(returned) : undefined;
    if (known !== undefined) return known;
    const policies = checkPolicies(where, returned);
    const id = `${policies.map((p) => p.name).join(",")}|${policySignature(policies)}`;
    let made = bySet.get(id);
    if (made !== undefined) {
      bySet.delete(id);
      if (policies.some((p) => !policiesSeen.has(p)) && ++rebuilt === NEW_POLICIES_THRESHOLD) {
        warnings.emit("policyPerRequest", where);
      }
    } else {
      if (bySet.size >= MAX_POLICY_SETS) {
        bySet.delete(bySet.keys().next().value!);
        warnings.emit("policyPerRequest", `${where}: more than ${MAX_POLICY_SETS} distinct policy sets`);
      }
      made = make(policies);
    }
    for (const p of policies) policiesSeen.add(p);
    bySet.set(id, made);
    byValue.set(returned as object, made);
    return made;
  };
}

/** What a dimension's `policy` function returned, as a set of policies, or an INVALID_ARGUMENT error naming the dimension. */
function checkPolicies(where: string, returned: unknown): readonly Policy[] {
  if (isPolicies(returned)) {
    const policies = Array.isArray(returned) ? returned as readonly Policy[] : [returned as Policy];
    if (new Set(policies.map((p) => p.name)).size === policies.length) return policies;
  }
  throw new FloodgateError(
    "INVALID_ARGUMENT",
    `${WHERE}: the \`policy\` function of ${where} returned ${
      describeValue(returned)
    }; it must return ${POLICIES_ACCEPTED} with unique names. The request was not counted.`,
  );
}
