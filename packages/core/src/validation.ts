import type { core } from "zod/mini";
import { describeValue, FloodgateError } from "./errors.ts";

/** What each option accepts, in words, for error messages. */
export type AcceptedOptions = Record<string, string>;

/**
 * Parses `input` with a zod schema once, at construction. A failure throws one
 * `FloodgateError("INVALID_OPTION")` that names the option, the value received and what is accepted.
 */
export function parseOptions<T>(
  schema: core.$ZodType<T>,
  input: unknown,
  where: string,
  accepted: AcceptedOptions,
): T {
  if (typeof input !== "object" || input === null || Array.isArray(input)) {
    throw new FloodgateError(
      "INVALID_OPTION",
      `${where}: expected an options object, received ${describeValue(input)}. Accepted options: ${Object.keys(accepted).join(", ")}.`,
    );
  }
  const result = (schema as unknown as { safeParse(v: unknown): { success: true; data: T } | { success: false; error: { issues: core.$ZodIssue[] } } }).safeParse(input);
  if (result.success) return result.data;
  // An unknown option (a typo such as `windowMS`) explains the other issues, so it is reported first.
  const issues = result.error.issues;
  const issue = issues.find((i) => i.code === "unrecognized_keys") ?? issues[0]!;
  throw new FloodgateError("INVALID_OPTION", `${where}: ${describeIssue(issue, input as Record<string, unknown>, accepted)}`);
}

function describeIssue(issue: core.$ZodIssue, input: Record<string, unknown>, accepted: AcceptedOptions): string {
  const names = Object.keys(accepted);
  if (issue.code === "unrecognized_keys") {
    const unknown = issue.keys[0]!;
    const guess = closest(unknown, names);
    return `unknown option \`${unknown}\`${guess ? ` (did you mean \`${guess}\`?)` : ""}; accepted options: ${names.join(", ")}.`;
  }
  const option = issue.path.map(String).join(".") || "(options)";
  let received: unknown = input;
  for (const part of issue.path) received = (received as Record<PropertyKey, unknown> | undefined)?.[part as PropertyKey];
  const top = String(issue.path[0] ?? "");
  return `invalid option \`${option}\`: received ${describeValue(received)}; expected ${accepted[top] ?? "a valid value"}.`;
}

function closest(word: string, candidates: readonly string[]): string | undefined {
  const lower = word.toLowerCase();
  return candidates.find((c) => c.toLowerCase() === lower) ??
    candidates.find((c) => lower.startsWith(c.toLowerCase()) || c.toLowerCase().startsWith(lower));
}
