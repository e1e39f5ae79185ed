import { FloodgateError } from "../errors.ts";
import { FOREIGN_OPTIONS } from "../foreign-options.ts";
import { isPolicies } from "../policies.ts";
import { closest, isRecord } from "../validation.ts";

// The options a rule object takes, checked before the rest: an option it does not take is named
// in the error, with what to write instead when another library has it (`{ limit: 5 }` as
// express-rate-limit writes a limit), rather than the whole `rules` map described.

const RULE_OPTIONS = [
  "policy",
  "limiter",
  "store",
  "key",
  "cost",
  "shadow",
  "enforce",
  "shadowHeaders",
  "shadowPolicy",
  "warnAt",
  "dimensions",
];

/** Throws INVALID_OPTION (prefixed `where`) for the first option a rule of `rules` does not take. */
export function checkRuleOptions(rules: unknown, where: string): void {
  if (!isRecord(rules)) return;
  for (const [name, rule] of Object.entries(rules as Record<string, unknown>)) {
    if (!isRecord(rule) || isPolicies(rule)) continue;
    for (const key of Object.keys(rule as object)) {
      if (RULE_OPTIONS.includes(key)) continue;
      const hint = FOREIGN_OPTIONS.option(key);
      const guess = hint === undefined ? closest(key, RULE_OPTIONS) : undefined;
      throw new FloodgateError(
        "INVALID_OPTION",
        `${where}: rule ${JSON.stringify(name)}: unknown option \`${key}\`${
          hint !== undefined ? ` ${hint}` : guess !== undefined ? ` (did you mean \`${guess}\`?)` : ""
        }; a rule is a policy, an array of policies, or { policy | limiter, store?, key?, cost?, shadow?, enforce?, shadowHeaders?, shadowPolicy?, warnAt? }.`,
      );
    }
  }
}
